//! `cake cost FILE --shape M=8192,N=8192,K=8192 [--calibration FILE] [--message-format json]`.
//!
//! Exit status: 0 an estimate was printed; 1 the program has errors, its target is not
//! calibrated, or it does not fit the target; 2 usage or I/O error (a missing or malformed
//! `--shape`, an unreadable file, an invalid calibration file).

use std::io::{self, Read, Write};
use std::path::PathBuf;

use cake::diag::Diagnostic;
use cake::render;
use cake::span::Span;

use cake::cost::report;
use cake::api::Error;

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
    let dims = match cake::shape::parse_all(&args.shape) {
        Ok(d) => d,
        Err(e) => {
            let d = Diagnostic::error("C101", format!("bad `--shape`: {e}"), Span::default(), "")
                .with_help("write the dims as `--shape M=8192,N=8192,K=8192`");
            emit_error(json, color, &name, None, &d);
            return 2;
        }
    };
    match cake::api::cost_source(&source, &dims, args.calibration.as_deref()) {
        Ok(est) => {
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
        Err(e @ (Error::Parse(_) | Error::Check(_) | Error::Verify(_))) => {
            let errors: Vec<Diagnostic> = e.diagnostics().into_iter().filter(Diagnostic::is_error).collect();
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
        Err(e) => {
            for d in e.diagnostics() {
                emit_error(json, color, &name, e.is_located().then_some(source.as_str()), &d);
            }
            if e.is_finding() {
                1
            } else {
                2
            }
        }
    }
}
