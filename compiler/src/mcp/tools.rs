//! The MCP tools that work in this process: check, explain, cost, lower, build and corpus show.
//! Each calls the library functions its CLI subcommand calls and answers with the JSON the CLI
//! prints with `--message-format json` (findings through `render::render_json_lines`).
//!
//! Every tool answers a [`Reply`]: a JSON object, and whether it is a tool error (MCP's
//! `isError`): the input was refused, or the stage could not produce what was asked (findings
//! block it). A skip (no CUDA toolchain) is not an error and not a success: its `status` is
//! `skipped` and it says why.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::input::{self, InputError, Program, Workspace, MAX_ARG_BYTES};
use crate::api::Error;
use crate::diag::{Diagnostic, Severity};
use crate::render;

/// A tool's answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub value: Value,
    pub is_error: bool,
}

impl Reply {
    pub fn ok(value: Value) -> Reply {
        Reply { value, is_error: false }
    }

    pub fn error(value: Value) -> Reply {
        Reply { value, is_error: true }
    }
}

impl From<InputError> for Reply {
    fn from(e: InputError) -> Reply {
        refusal(&e.subject, &e.diagnostic)
    }
}

/// A refused call: `{"status": "error", "error": <the diagnostic as the CLI's JSON>}`.
pub fn refusal(subject: &str, d: &Diagnostic) -> Reply {
    Reply::error(json!({ "status": "error", "error": parse_line(&render::render_json_line_unlocated(subject, d)) }))
}

/// One JSON line of the renderer as a value (it always renders valid JSON).
fn parse_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| json!({ "code": "E0000", "message": format!("internal error: {e}") }))
}

/// Diagnostics located in `p`'s source as the CLI's JSON objects, one per diagnostic, as
/// `cake check` shows them by default: follow-on findings left out (counted in their cause's
/// `suppressed`), internal details left out.
pub fn findings(p: &Program, diags: &[Diagnostic]) -> Vec<Value> {
    let shown = crate::diag::shown(diags, false, false);
    render::render_json_lines_shown(&p.name, &p.source, &shown.diagnostics, &shown.hidden_per_finding, crate::verify::RuleSet::builtin())
        .lines()
        .map(parse_line)
        .collect()
}

/// Shown findings of one severity (follow-ons are not counted, as `cake check` does not).
fn count(diags: &[Diagnostic], severity: Severity) -> usize {
    diags.iter().filter(|d| d.severity == severity && !d.is_follow_on()).count()
}

/// A stage that cannot go on because the program has error findings.
pub(super) fn blocked(p: &Program, diags: &[Diagnostic], what: &str) -> Reply {
    Reply::error(json!({
        "status": "findings",
        "file": p.name,
        "errors": count(diags, Severity::Error),
        "message": format!("{what}: the program has error findings"),
        "findings": findings(p, diags),
    }))
}

/// `check`: parse, type-check and verify with the checkout's rules (as `cake check` does); every
/// finding, with the counts `cake check` sums up and the rule set that judged them.
pub fn check(ws: &Workspace, program: Option<&str>, path: Option<&str>) -> Reply {
    let p = match ws.program(program, path) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    // The rules `cake check` run in the server's directory would use (the checkout's, so an
    // accepted rule takes effect without a restart), resolved per call and named in the answer.
    let rules = match crate::rule_source::ActiveRules::resolve_from(None, ws.root()) {
        Ok(r) => r,
        Err(d) => return refusal("compiler/rules", &d),
    };
    let diags = crate::check::check_source_with(&p.source, &rules.set).diagnostics;
    let errors = count(&diags, Severity::Error);
    Reply::ok(json!({
        "status": if errors == 0 { "clean" } else { "findings" },
        "file": p.name,
        "rules": rules.to_json(),
        "errors": errors,
        "warnings": count(&diags, Severity::Warning),
        "hints": count(&diags, Severity::Hint),
        "coverage_limits": count(&diags, Severity::CoverageLimit),
        "findings": findings(&p, &diags),
    }))
}

/// `explain`: what `cake explain QUERY` prints, for a code (`V201`) or an operation (`wgmma`).
pub fn explain(query: &str) -> Reply {
    let query = match input::text("query", query, MAX_ARG_BYTES) {
        Ok(q) => q,
        Err(e) => return e.into(),
    };
    match crate::explain::explain(query, false) {
        Some((subject, text)) => Reply::ok(json!({ "status": "ok", "query": query, "kind": subject.as_str(), "text": text })),
        None => {
            let mut d = Diagnostic::error(
                "M007",
                format!("`{query}` is neither a documented diagnostic code nor an operation of the op catalog"),
                crate::span::Span::default(),
                "",
            )
            .with_help(crate::explain::UNKNOWN_HELP);
            let codes = crate::verify::rules::all_documented();
            let ops = crate::catalog::Catalog::builtin();
            let names = codes.iter().map(|c| c.code.as_str()).chain(ops.ops.iter().map(|o| o.name.as_str()));
            if let Some(near) = crate::diag::closest(query.trim(), names) {
                d = d.with_note(format!("did you mean `{near}`?"));
            }
            refusal("query", &d)
        }
    }
}

/// `cost`: the cost model's estimate at `shape` (`M=8192,N=8192,K=8192`), as `cake cost
/// --message-format json` prints it.
pub fn cost(ws: &Workspace, program: Option<&str>, path: Option<&str>, shape: &str, calibration: Option<&str>) -> Reply {
    let p = match ws.program(program, path) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let shape = match input::text("shape", shape, MAX_ARG_BYTES) {
        Ok(s) => s,
        Err(e) => return e.into(),
    };
    let dims: BTreeMap<String, i64> = match crate::shape::parse_all(&[shape]) {
        Ok(d) => d,
        Err(e) => {
            // The CLI's code and help for a malformed `--shape`.
            let d = Diagnostic::error("C101", format!("bad `shape`: {e}"), crate::span::Span::default(), "")
                .with_help("write the dims as `M=8192,N=8192,K=8192`");
            return refusal("shape", &d);
        }
    };
    let calibration = match calibration.map(|c| ws.confine("calibration", c)).transpose() {
        Ok(c) => c,
        Err(e) => return e.into(),
    };
    match crate::api::cost_source(&p.source, &dims, calibration.as_deref()) {
        Ok(est) => Reply::ok(crate::cost::report::json(&est, &p.name, &p.source)),
        Err(e @ (Error::Parse(_) | Error::Check(_) | Error::Verify(_))) => {
            let errors: Vec<Diagnostic> = e.diagnostics().into_iter().filter(Diagnostic::is_error).collect();
            blocked(&p, &errors, "no cost estimate")
        }
        Err(e) => {
            let diagnostic = e.diagnostics().remove(0);
            if e.is_located() {
                Reply::error(json!({ "status": "error", "error": findings(&p, std::slice::from_ref(&diagnostic))[0] }))
            } else {
                refusal(&p.name, &diagnostic)
            }
        }
    }
}

/// Check and verify for `lower` / `build`: the validated program and its non-blocking findings,
/// or the reply that stops the tool.
fn validated(p: &Program, what: &str) -> Result<(crate::verify::Validated, Vec<Diagnostic>), Reply> {
    match crate::api::validate(&p.source) {
        Ok(v) => {
            let findings = v.findings.clone();
            Ok((v, findings))
        }
        Err(e) => Err(blocked(p, &e.diagnostics(), what)),
    }
}

fn file_name(p: &Program) -> String {
    p.path
        .as_deref()
        .and_then(|f| f.file_name())
        .map_or_else(|| p.name.clone(), |f| f.to_string_lossy().into_owned())
}

/// `lower`: the CUDA C++ `cake lower` prints, or the coded lowering error.
pub fn lower(ws: &Workspace, program: Option<&str>, path: Option<&str>, line_directives: bool) -> Reply {
    let p = match ws.program(program, path) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let (v, diags) = match validated(&p, "not lowered") {
        Ok(x) => x,
        Err(r) => return r,
    };
    let name = file_name(&p);
    let mut opts = crate::lower::LowerOptions::with_source(&name, &p.source);
    opts.line_directives = line_directives;
    match crate::api::lower(&v, &opts) {
        Ok(l) => Reply::ok(json!({
            "status": "ok",
            "file": p.name,
            "entry": l.entry,
            "findings": findings(&p, &diags),
            "cuda": l.cuda,
        })),
        Err(e) => blocked(&p, &[e.to_diagnostic()], "not lowered"),
    }
}

/// `build`: lower and compile with NVRTC; the launch spec and the ptxas report (what `cake build`
/// writes as `launch.json` and `ptxas.json`), and the build directory when `out` is given.
pub fn build(ws: &Workspace, program: Option<&str>, path: Option<&str>, arch: Option<&str>, out: Option<&str>) -> Reply {
    let p = match ws.program(program, path) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let out = match out.map(|o| ws.confine("out", o)).transpose() {
        Ok(o) => o,
        Err(e) => return e.into(),
    };
    let arch = match arch.map(|a| input::text("arch", a, 64)).transpose() {
        Ok(a) => a,
        Err(e) => return e.into(),
    };
    let (v, mut diags) = match validated(&p, "not built") {
        Ok(x) => x,
        Err(r) => return r,
    };
    let target = match crate::api::target_of(v.module()) {
        Ok(t) => t,
        Err(e) => return refusal(&p.name, &e.diagnostics()[0]),
    };
    let mut target = target.clone();
    if let Some(a) = arch {
        target.arch = a.to_string();
    }
    let name = file_name(&p);
    match crate::api::build(&v, &target, &crate::lower::LowerOptions::with_source(&name, &p.source)) {
        Ok(b) => {
            diags.extend(b.diagnostics.iter().cloned());
            if let Some(dir) = &out {
                if let Err(e) = crate::nvrtc::write_build_dir(&b, dir) {
                    let d = Diagnostic::error("E0003", format!("cannot write `{}`: {e}", dir.display()), crate::span::Span::default(), "")
                        .with_help("check that the directory is writable and the disk is not full");
                    return refusal("out", &d);
                }
            }
            Reply::ok(json!({
                "status": "ok",
                "file": p.name,
                "arch": target.arch,
                "entry": b.entry,
                "cubin_bytes": b.cubin.len(),
                "launch": b.launch,
                "ptxas": b.report,
                "spill_bytes": b.report.spills(),
                "findings": findings(&p, &diags),
                "out": out.map(|d| d.display().to_string()),
            }))
        }
        Err(e @ crate::nvrtc::BuildError::Toolchain { .. }) => Reply::ok(json!({
            "status": "skipped",
            "skipped": "no CUDA toolchain",
            "code": e.code(),
            "file": p.name,
            "finding": parse_line(&render::render_json_line_unlocated(&p.name, &e.to_diagnostics()[0])),
        })),
        Err(e) => blocked(&p, &e.to_diagnostics(), &format!("not built [{}]", e.code())),
    }
}

/// `corpus_show`: a corpus case's program (the template expanded) and its effective manifest.
pub fn corpus_show(id: &str) -> Reply {
    let id = match input::text("id", id, MAX_ARG_BYTES) {
        Ok(i) => i.trim(),
        Err(e) => return e.into(),
    };
    let root = crate::corpus::run::default_root();
    let corpus = match crate::corpus::Corpus::load(&root) {
        Ok(c) => c,
        Err(e) => {
            let d = Diagnostic::error("E0001", format!("cannot read the corpus at {}: {e}", root.display()), crate::span::Span::default(), "")
                .with_help("start `cake mcp` inside a Cake checkout (the corpus is its `corpus/` folder)");
            return refusal("corpus", &d);
        }
    };
    let Some(case) = corpus.case(id) else {
        let mut d = Diagnostic::error("M007", format!("the corpus has no case `{id}`"), crate::span::Span::default(), "")
            .with_help("case ids are `family/case`; `cake corpus list --cases` lists them");
        if let Some(near) = crate::diag::closest(id, corpus.cases.iter().map(|c| c.id.as_str())) {
            d = d.with_note(format!("did you mean `{near}`?"));
        }
        return refusal("id", &d);
    };
    Reply::ok(json!({
        "status": "ok",
        "id": case.id,
        "family": case.family,
        "manifest": case.manifest,
        "program": case.source,
    }))
}
