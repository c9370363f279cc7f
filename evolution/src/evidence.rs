//! `cake-evolve-compiler evidence list|show`: the records of an evidence store, for people (one
//! line per record; one record with its signatures, the program lines its failure names and the
//! run's facts) and for machines (`--message-format json`).
//!
//! Record text comes from tools and from whoever wrote a failure report: every piece of it is
//! escaped ([`crate::sanitize`]) before it reaches a terminal.

use serde::Serialize;
use serde_json::{json, Value};

use crate::mine::{record_failures, RecordFailure};
use crate::sanitize;
use crate::store::{EvidenceStore, Record, SpanKind, StoreError, Stored};

/// Program lines shown on each side of a failing line.
pub const CONTEXT_LINES: usize = 2;

/// The help line of a store error met by `evidence list` / `evidence show`.
pub fn help(e: &StoreError) -> &'static str {
    match e.code {
        "S007" => "`cake-evolve-compiler evidence list --store DIR` lists the record ids; give one whole, or 8 or more of its first hex digits that no other record starts with",
        "S009" => "give the store with `--store DIR` (default `.cake/evidence`), or import evidence into it first (`cake-evolve-compiler import`)",
        "S003" | "S004" | "S005" => "the record file is damaged or is not a record; `cake-evolve-compiler mine` skips it the same way",
        _ => "check the store folder's permissions and contents",
    }
}

/// A store error as one JSON object (what `--message-format json` prints instead of text).
pub fn error_json(e: &StoreError) -> Value {
    json!({ "code": e.code, "severity": "error", "message": e.message, "path": e.path.display().to_string(), "help": help(e) })
}

/// One row of `evidence list`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub id: String,
    pub kind: &'static str,
    /// `verify` / `lower` / `compile` / `run` (a failure report), or the stage a run reached.
    pub stage: String,
    /// The failure class, or a run's verdict.
    pub class: String,
    pub program: String,
    /// The first failure's signature; empty for a run that passed.
    pub signature: String,
}

fn row(s: &Stored) -> Row {
    let (stage, class) = match &s.record {
        Record::Failure(f) => (f.stage.as_str().to_string(), f.error_class.clone()),
        Record::Run(r) => (r.stage.clone(), r.error.as_ref().map_or_else(|| r.verdict.name().to_string(), |e| e.class.clone())),
    };
    let signature = record_failures(s).into_iter().next().map(|f| f.signature).unwrap_or_default();
    Row { id: s.id.as_str().to_string(), kind: s.kind().as_str(), stage, class, program: s.record.program_sha256().to_string(), signature }
}

/// Every readable record as a row, and the problems met (unreadable records are skipped).
pub fn list(store: &EvidenceStore) -> (Vec<Row>, Vec<StoreError>) {
    let scan = store.scan();
    (scan.records.iter().map(row).collect(), scan.problems)
}

/// The rows as a table for people.
pub fn render_list(rows: &[Row]) -> String {
    let mut out = format!("{:<12}  {:<7}  {:<20}  {:<28}  {:<12}  signature\n", "record", "kind", "stage", "class", "program");
    for r in rows {
        out.push_str(&format!(
            "{:<12}  {:<7}  {:<20}  {:<28}  {:<12}  {}\n",
            short(&r.id),
            r.kind,
            sanitize::line_bounded(&r.stage, 60),
            sanitize::line_bounded(&r.class, 60),
            short(&r.program),
            sanitize::line_bounded(&r.signature, 200)
        ));
    }
    out.push_str(&format!("{} record(s); `cake-evolve-compiler evidence show ID` opens one (8 or more hex digits of its id)\n", rows.len()));
    out
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The record `id` (whole, or a unique prefix of at least 8 hex digits) of the store.
pub fn open(store: &EvidenceStore, id: &str) -> Result<Stored, StoreError> {
    store.get(id)
}

/// The record as JSON: id, kind, file, program (and whether the store holds its source), the
/// failures mining reads from it, and the record itself.
pub fn show_json(store: &EvidenceStore, s: &Stored) -> Value {
    let sha = s.record.program_sha256();
    let record = match &s.record {
        Record::Run(r) => serde_json::to_value(r.as_ref()),
        Record::Failure(f) => serde_json::to_value(f.as_ref()),
    }
    .unwrap_or(Value::Null);
    json!({
        "id": s.id.as_str(),
        "kind": s.kind().as_str(),
        "path": s.path.display().to_string(),
        "program": { "sha256": sha, "in_store": matches!(store.program(sha), Ok(Some(_))) },
        "failures": record_failures(s),
        "record": record,
    })
}

/// The record for people: what it is, its signatures with the program lines they name, and the
/// facts of the run.
pub fn show_text(store: &EvidenceStore, s: &Stored) -> String {
    let mut out = String::new();
    let sha = s.record.program_sha256();
    let kind = match &s.record {
        Record::Run(_) => "run record",
        Record::Failure(_) => "failure report",
    };
    out.push_str(&format!("record    {} ({kind}, {})\n", s.id, sanitize::line(&s.path.display().to_string())));
    let source = match store.program(sha) {
        Ok(Some(src)) => Some(src),
        Ok(None) => {
            out.push_str(&format!("program   {} (not in the store's programs/: no source lines to show)\n", sanitize::line(sha)));
            None
        }
        Err(e) => {
            out.push_str(&format!("program   {} (its source cannot be read: {e})\n", sanitize::line(sha)));
            None
        }
    };
    if let Some(src) = &source {
        let label = cake::syntax::parse(src).map(|f| format!(" `kernel {}`, target {}", f.kernel.name, f.target.name)).unwrap_or_default();
        out.push_str(&format!("program   {sha}{}\n", sanitize::line(&label)));
    }
    for (k, v) in facts(&s.record) {
        out.push_str(&format!("{k:<9} {}\n", sanitize::line_bounded(&v, 400)));
    }
    let failures = record_failures(s);
    if failures.is_empty() {
        out.push_str("failures  none: mining reads no failure from this record\n");
    }
    for f in &failures {
        out.push_str(&format!("\nfailure   {}\n", sanitize::line_bounded(&f.signature, 400)));
        for l in f.message.lines().take(6) {
            out.push_str(&format!("          {}\n", sanitize::line_bounded(l, 400)));
        }
        out.push_str(&place(f, source.as_deref()));
    }
    out
}

/// Where the failure points, with the program lines around it when the store has the source.
fn place(f: &RecordFailure, source: Option<&str>) -> String {
    let (line, col, width) = match (&f.line, &f.bytes, source) {
        (Some(l), _, _) if l.kind != SpanKind::Cake => {
            let what = if l.kind == SpanKind::Cuda { "generated CUDA" } else { "PTX" };
            return format!("at        line {} of the {what} (`mine` maps CUDA lines back through the lowering)\n", l.line);
        }
        (Some(l), _, Some(_)) => (l.line as usize, l.col.map(|c| c as usize), 1),
        (None, Some(b), Some(src)) => {
            let r = cake::render::clamp_span(src, *b);
            let (line, col) = cake::span::line_col(src, r.start);
            (line, Some(col), src[r.clone()].lines().next().map_or(1, |t| t.chars().count().max(1)))
        }
        (Some(l), _, None) => return format!("at        line {} of the program\n", l.line),
        (None, Some(b), None) => return format!("at        bytes {}..{} of the program\n", b.start, b.end),
        (None, None, _) => return "at        no place named (the failure is about the whole run)\n".to_string(),
    };
    let Some(src) = source else { return String::new() };
    let lines: Vec<&str> = src.lines().collect();
    if line == 0 || line > lines.len() {
        return format!("at        line {line}, past the program's {} lines\n", lines.len());
    }
    let mut out = format!("at        line {line}{}\n", col.map(|c| format!(", column {c}")).unwrap_or_default());
    let first = line.saturating_sub(CONTEXT_LINES).max(1);
    let last = (line + CONTEXT_LINES).min(lines.len());
    let w = last.to_string().len();
    for n in first..=last {
        let mark = if n == line { '>' } else { ' ' };
        out.push_str(&format!("  {mark} {n:>w$} | {}\n", sanitize::line(lines[n - 1])));
        if n == line {
            if let Some(c) = col {
                out.push_str(&format!("    {:>w$} | {}{}\n", "", " ".repeat(c.saturating_sub(1)), "^".repeat(width)));
            }
        }
    }
    out
}

/// The facts of a record, as (label, value) lines.
fn facts(r: &Record) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    match r {
        Record::Failure(f) => {
            v.push(("stage", f.stage.as_str().to_string()));
            v.push(("tool", f.tool.clone()));
            v.push(("class", f.error_class.clone()));
            v.push(("target", f.target.clone()));
            if !f.shapes.is_empty() {
                v.push(("shape", dims(&f.shapes)));
            }
            if let Some(s) = f.gpu_seconds {
                v.push(("gpu time", format!("{s} s")));
            }
            if let Some(file) = &f.source_file {
                v.push(("from", format!("files/{file}.*")));
            }
            for (k, x) in &f.extra {
                v.push(("extra", format!("{k} = {x}")));
            }
        }
        Record::Run(r) => {
            v.push(("command", format!("cake {} (cake {}{})", r.command, r.cake.version, r.cake.git_commit.as_deref().map(|c| format!(", {c}")).unwrap_or_default())));
            v.push(("verdict", format!("{} (last stage reached: {})", r.verdict.name(), r.stage)));
            if let Some(p) = r.problem() {
                v.push(("problem", p));
            }
            v.push(("target", format!("{}{}", r.program.target, r.run_arch.as_deref().map(|a| format!(", run as {a}")).unwrap_or_default())));
            if let Some(g) = &r.gpu {
                v.push(("gpu", format!("{} (sm_{}{}, {} SMs)", g.name, g.cc[0], g.cc[1], g.sm_count)));
            }
            v.push(("shape", format!("{}; inputs {}, seed {}", dims(&r.shape), r.dist, r.seed)));
            if let Some(w) = &r.workload {
                v.push(("oracle", w.oracle.clone()));
            }
            for c in &r.checks {
                v.push(("check", format!("{}: {} {} of {} wrong, {} non-finite", c.oracle, if c.passed { "passed," } else { "failed," }, c.mismatches, c.checked, c.nonfinite)));
            }
            if let Some(t) = &r.times_ms {
                v.push(("time", format!("median {:.4} ms (min {:.4}, p90 {:.4}) over {} repeats", t.median_ms, t.min_ms, t.p90_ms, t.repeats)));
            }
            if let Some(p) = &r.prediction {
                v.push(("predicted", format!("{:.4} ms, {} bound", p.predicted_ms, p.bottleneck)));
            }
            if let Some(p) = &r.ptxas {
                v.push(("ptxas", format!("{} registers, {} bytes spill stores", p.registers.map_or("?".to_string(), |n| n.to_string()), p.spill_store_bytes)));
            }
            for n in &r.notes {
                v.push(("note", n.clone()));
            }
        }
    }
    v
}

fn dims(shape: &std::collections::BTreeMap<String, i64>) -> String {
    let d: Vec<String> = shape.iter().map(|(k, x)| format!("{k}={x}")).collect();
    if d.is_empty() {
        "-".into()
    } else {
        d.join(",")
    }
}
