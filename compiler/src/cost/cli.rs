//! `cake cost FILE --shape M=8192,N=8192,K=8192 [--calibration FILE] [--message-format json]`.
//!
//! Exit status: 0 an estimate was printed; 1 the program has errors, its target is not
//! calibrated, or it does not fit the target; 2 usage or I/O error (a missing or malformed
//! `--shape`, an unreadable file, an invalid calibration file).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::diag::Diagnostic;
use crate::render;
use crate::span::Span;

use super::{builtin_calibration, estimate, report, Calibration, CostError, Estimate};

#[derive(clap::Args, Debug)]
pub struct CostArgs {
    /// The .cake program (`-` reads standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Dim values: `M=8192,N=8192,K=8192` (the flag may repeat).
    #[arg(long, value_name = "DIM=VALUE,...")]
    pub shape: Vec<String>,
    /// Parameters to use instead of the built-in `calibration/<target>.toml` (a recalibration
    /// proposal, say).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
}

/// Parse `M=8192,N=8192` (repeatable, `_` allowed in numbers).
pub fn parse_shape(items: &[String]) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for item in items {
        for part in item.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}` is not DIM=VALUE"))?;
            let k = k.trim();
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("`{k}` is not a dim name"));
            }
            let v: i64 = v.trim().replace('_', "").parse().map_err(|_| format!("`{}` is not an integer (in `{part}`)", v.trim()))?;
            if out.insert(k.to_string(), v).is_some() {
                return Err(format!("`{k}` is given twice"));
            }
        }
    }
    Ok(out)
}

fn emit_error(json: bool, color: bool, name: &str, source: Option<&str>, d: &Diagnostic) {
    if json {
        let line = match source {
            Some(src) => render::render_json_line(name, src, d),
            None => render::render_json_line_unlocated(name, d),
        };
        println!("{line}");
    } else {
        let text = match source {
            Some(src) if d.primary.span != Span::default() => render::render_human(name, src, std::slice::from_ref(d), color),
            _ => render::render_human_unlocated(d, color),
        };
        let _ = io::stderr().write_all(text.as_bytes());
    }
}

/// Run `cake cost`; returns the exit status.
pub fn main(args: CostArgs, json: bool, color: bool) -> u8 {
    let is_stdin = args.file.as_os_str() == "-";
    let name = if is_stdin { "<stdin>".to_string() } else { args.file.display().to_string() };
    let text = if is_stdin {
        let mut buf = String::new();
        io::stdin().read_to_string(&mut buf).map(|_| buf)
    } else {
        std::fs::read_to_string(&args.file)
    };
    let source = match text {
        Ok(s) => s,
        Err(e) => {
            let d = Diagnostic::error("E0001", format!("cannot read `{name}`: {e}"), Span::default(), "");
            emit_error(json, color, &name, None, &d);
            return 2;
        }
    };
    let dims = match parse_shape(&args.shape) {
        Ok(d) => d,
        Err(e) => {
            let d = Diagnostic::error("C101", format!("bad `--shape`: {e}"), Span::default(), "")
                .with_help("write the dims as `--shape M=8192,N=8192,K=8192`");
            emit_error(json, color, &name, None, &d);
            return 2;
        }
    };
    match cost_source(&source, &dims, args.calibration.as_deref()) {
        CostOutcome::Estimate(est) => {
            let out = if json {
                format!("{}\n", report::json(&est, &name, &source))
            } else {
                report::human(&est, &name, &source, color)
            };
            let mut stdout = io::stdout().lock();
            let _ = stdout.write_all(out.as_bytes());
            let _ = stdout.flush();
            0
        }
        CostOutcome::Findings(errors) => {
            if json {
                for d in &errors {
                    println!("{}", render::render_json_line(&name, &source, d));
                }
            } else {
                let _ = io::stderr().write_all(render::render_human(&name, &source, &errors, color).as_bytes());
                let _ = writeln!(io::stderr(), "no cost estimate: the program has errors");
            }
            1
        }
        CostOutcome::Refused { diagnostic, located, exit } => {
            emit_error(json, color, &name, located.then_some(source.as_str()), &diagnostic);
            exit
        }
    }
}

/// What `cake cost` finds for a program's text: an estimate, or why there is none.
#[derive(Debug)]
pub enum CostOutcome {
    Estimate(Box<Estimate>),
    /// The program has error findings (exit status 1); only the errors are kept.
    Findings(Vec<Diagnostic>),
    /// No estimate: a calibration or shape problem. `located` says whether the diagnostic's
    /// spans point into the program; `exit` is the command's exit status (1 or 2).
    Refused { diagnostic: Diagnostic, located: bool, exit: u8 },
}

/// Check `source` and estimate it at `dims` with the calibration at `calibration` (default: the
/// built-in one of the program's target). `cake cost` and the MCP server's `cost` tool both
/// call this, so they answer alike.
pub fn cost_source(source: &str, dims: &BTreeMap<String, i64>, calibration: Option<&Path>) -> CostOutcome {
    let checked = crate::check::check_source(source);
    let errors: Vec<Diagnostic> = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
    let Some(validated) = checked.validated.filter(|_| errors.is_empty()) else {
        return CostOutcome::Findings(errors);
    };
    let loaded;
    let cal: &Calibration = match calibration {
        Some(path) => match Calibration::load(path) {
            Ok(c) => {
                loaded = c;
                &loaded
            }
            Err(e) => {
                let diagnostic = CostError::BadCalibration(e).to_diagnostic();
                return CostOutcome::Refused { diagnostic, located: false, exit: 2 };
            }
        },
        None => match builtin_calibration(&validated.module().target) {
            Ok(c) => c,
            Err(e) => {
                let exit = if matches!(e, CostError::BadCalibration(_)) { 2 } else { 1 };
                return CostOutcome::Refused { diagnostic: e.to_diagnostic(), located: true, exit };
            }
        },
    };
    match estimate(&validated, cal, dims) {
        Ok(est) => CostOutcome::Estimate(Box::new(est)),
        Err(e) => {
            let exit = match e {
                CostError::MissingDims { .. } | CostError::BadDim { .. } | CostError::BadCalibration(_) => 2,
                _ => 1,
            };
            CostOutcome::Refused { diagnostic: e.to_diagnostic(), located: true, exit }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_shape;

    #[test]
    fn shapes() {
        let d = parse_shape(&["M=8192,N=8_192".into(), "K=64".into()]).unwrap();
        assert_eq!(d["M"], 8192);
        assert_eq!(d["N"], 8192);
        assert_eq!(d["K"], 64);
        assert!(parse_shape(&["M".into()]).is_err());
        assert!(parse_shape(&["M=x".into()]).is_err());
        assert!(parse_shape(&["M=1,M=2".into()]).is_err());
    }
}
