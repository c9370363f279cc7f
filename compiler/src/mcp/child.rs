//! The `run` and `bench` tools: the `cake` binary itself (`std::env::current_exe()`) runs `cake
//! run` / `cake bench` as a child process, in its own process group, under a wall-clock limit.
//! A child can hang or crash on a broken schedule; the server must outlive it, so nothing of
//! the GPU runtime runs in the server's process.
//!
//! The answer is the child's run records (the JSON it wrote to `EVIDENCE/runs/`), its table
//! and its log. The child's exit status decides the status: 0 `passed`, 1 `failed`, 3
//! `skipped` (no GPU on this machine: the records say `no_gpu`), 2 a refused argument. Calls run
//! one at a time.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use super::input::{self, InputError, Workspace, MAX_ARG_BYTES, MAX_WORKLOAD_BYTES};
use super::tools::{blocked, refusal, Reply};
use crate::diag::Diagnostic;
use crate::runtime::harness::Mode;
use crate::runtime::isolate::{self, ChildStatus};
use crate::runtime::record::{self, RunRecord};
use crate::span::Span;

/// The default and the largest wall-clock limit of one tool call (the whole child).
pub const DEFAULT_TIME_LIMIT_S: f64 = 600.0;
pub const MAX_TIME_LIMIT_S: f64 = 3600.0;

/// What a `run` / `bench` call asks for, validated by [`RunRequest::child_args`].
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    pub program: Option<String>,
    pub path: Option<String>,
    pub workload: Option<String>,
    pub workload_path: Option<String>,
    pub shapes: Vec<String>,
    pub dists: Vec<String>,
    pub timeout_s: Option<f64>,
    pub time_limit_s: Option<f64>,
    pub seed: Option<u64>,
    pub evidence: Option<String>,
    /// `bench` only: `cublas` or `none`.
    pub baseline: Option<String>,
}

const DISTS: [&str; 4] = ["normal", "uniform", "outliers", "ties"];
const BASELINES: [&str; 2] = ["cublas", "none"];

/// Where the workload spec of a call comes from.
enum Workload {
    File(PathBuf),
    Inline(String),
}

/// A scratch directory for an inline program and workload, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cake-mcp-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bad_arg(arg: &str, message: String, help: &str) -> Reply {
    InputError::new(arg, "M004", message, help).into()
}

/// Run `cake run` (or `bench`) for the request and answer with its records.
pub fn run(ws: &Workspace, mode: Mode, req: &RunRequest) -> Reply {
    match prepare(ws, mode, req) {
        Ok((args, evidence, limit, scratch)) => {
            // One child at a time: concurrent runs would share the GPU and skew each other's
            // timings, and this call's records are told apart by what appeared during it.
            static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
            let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let reply = spawn(mode, &args, &evidence, limit);
            drop(scratch);
            reply
        }
        Err(reply) => reply,
    }
}

type Prepared = (Vec<String>, PathBuf, Duration, Scratch);

/// Validate the request and build the child's command line; `Err` is the reply that stops it.
fn prepare(ws: &Workspace, mode: Mode, req: &RunRequest) -> Result<Prepared, Reply> {
    let program = ws.program(req.program.as_deref(), req.path.as_deref())?;
    // The harness refuses a program with errors itself; checking here answers with the findings
    // as JSON rather than the child's human text.
    let diags = crate::check::check_source(&program.source).diagnostics;
    if diags.iter().any(Diagnostic::is_error) {
        return Err(blocked(&program, &diags, "nothing ran"));
    }
    // The workload spec: a file the child reads where it is (the records name it), or inline
    // text written beside an inline program in a scratch directory.
    let workload = match (&req.workload, &req.workload_path) {
        (Some(w), None) => Some(Workload::Inline(input::workload_text(w)?.to_string())),
        (None, Some(p)) => Some(Workload::File(ws.read("workload_path", p, MAX_WORKLOAD_BYTES)?.0)),
        (Some(_), Some(_)) => {
            return Err(bad_arg(
                "workload",
                "both `workload` and `workload_path` were given".into(),
                "give the workload spec once: its TOML text as `workload`, or a file as `workload_path`",
            ))
        }
        (None, None) if program.path.is_none() => {
            return Err(bad_arg(
                "workload",
                "an inline program needs its workload spec".into(),
                "pass the workload's TOML as `workload` (see `examples/*.workload.toml`), or pass the program as `path` with its `<stem>.workload.toml` beside it",
            ))
        }
        (None, None) => None,
    };
    // Inline text goes to a scratch directory the child can read; it is removed after the call.
    let scratch = Scratch::new().map_err(|e| {
        InputError::new("program", "M006", format!("cannot create a scratch directory: {e}"), "check that the temporary directory is writable")
    })?;
    let scratch_file = |name: &str, text: &str| -> Result<PathBuf, Reply> {
        let file = scratch.0.join(name);
        std::fs::write(&file, text).map_err(|e| {
            Reply::from(InputError::new(name, "M006", format!("cannot write `{}`: {e}", file.display()), "check that the temporary directory is writable"))
        })?;
        Ok(file)
    };
    let program_file = match &program.path {
        Some(p) => p.clone(),
        None => scratch_file("program.cake", &program.source)?,
    };
    let mut args = vec![mode.name().to_string(), program_file.display().to_string()];
    let workload_file = match workload {
        Some(Workload::File(f)) => Some(f),
        Some(Workload::Inline(text)) => Some(scratch_file("program.workload.toml", &text)?),
        None => None,
    };
    if let Some(f) = workload_file {
        args.push("--workload".into());
        args.push(f.display().to_string());
    }
    for s in &req.shapes {
        args.push("--shape".into());
        args.push(input::text("shapes", s, MAX_ARG_BYTES)?.to_string());
    }
    for d in &req.dists {
        if !DISTS.contains(&d.as_str()) {
            return Err(bad_arg("dists", format!("`{d}` is not a distribution"), "distributions are normal, uniform, outliers and ties"));
        }
        args.push("--dist".into());
        args.push(d.clone());
    }
    if let Some(t) = req.timeout_s {
        if !(t > 0.0 && t.is_finite()) {
            return Err(bad_arg("timeout_s", format!("`timeout_s` is {t}"), "give the limit of one run in seconds, a positive number (default 60)"));
        }
        args.push("--timeout".into());
        args.push(t.to_string());
    }
    if let Some(seed) = req.seed {
        args.push("--seed".into());
        args.push(seed.to_string());
    }
    if let Some(b) = &req.baseline {
        if mode != Mode::Bench || !BASELINES.contains(&b.as_str()) {
            return Err(bad_arg("baseline", format!("`baseline` `{b}` is not accepted here"), "`bench` takes `baseline` `cublas` or `none`; `run` takes none"));
        }
        args.push("--baseline".into());
        args.push(b.clone());
    }
    let evidence = match &req.evidence {
        Some(e) => ws.confine("evidence", e)?,
        None => ws.root().join(record::DEFAULT_EVIDENCE_DIR),
    };
    args.push("--evidence".into());
    args.push(evidence.display().to_string());
    let limit = req.time_limit_s.unwrap_or(DEFAULT_TIME_LIMIT_S);
    if !(limit > 0.0 && limit <= MAX_TIME_LIMIT_S) {
        return Err(bad_arg(
            "time_limit_s",
            format!("`time_limit_s` is {limit}"),
            "give the limit of the whole call in seconds, more than 0 and at most 3600 (default 600)",
        ));
    }
    Ok((args, evidence, Duration::from_secs_f64(limit), scratch))
}

/// The record files in `evidence`'s runs folder.
fn record_files(evidence: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(record::runs_dir(evidence))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect())
        .unwrap_or_default()
}

fn spawn(mode: Mode, args: &[String], evidence: &Path, limit: Duration) -> Reply {
    let before = record_files(evidence);
    let mut cmd = Command::new(crate::runtime::harness::current_exe());
    cmd.args(args).env("NO_COLOR", "1");
    let outcome = match isolate::run_with_timeout(cmd, limit) {
        Ok(o) => o,
        Err(e) => {
            let d = Diagnostic::error("M006", format!("cannot start `cake {}`: {e}", mode.name()), Span::default(), "")
                .with_help("the server spawns its own binary; check that it is still on disk and executable");
            return refusal(mode.name(), &d);
        }
    };
    // This call's records: those that were not there before it (names are content hashes).
    let mut records: Vec<(Value, RunRecord)> = record_files(evidence)
        .difference(&before)
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| Some((serde_json::from_str::<Value>(&t).ok()?, serde_json::from_str::<RunRecord>(&t).ok()?)))
        .collect();
    records.sort_by_key(|(_, r)| r.created_unix_ms);
    let code = match outcome.status {
        ChildStatus::Exited(c) => c,
        ChildStatus::TimedOut => {
            let d = Diagnostic::error(
                "M005",
                format!("`cake {}` did not finish within {:.0} s; it was killed", mode.name(), limit.as_secs_f64()),
                Span::default(),
                "",
            )
            .with_note(format!("{} run record(s) were written before the limit", records.len()))
            .with_help("raise `time_limit_s` (at most 3600), or ask for fewer shapes and distributions");
            let mut reply = refusal(mode.name(), &d);
            reply.value["records"] = records.into_iter().map(|(v, _)| v).collect();
            return reply;
        }
        ChildStatus::Signaled(sig) => {
            let d = Diagnostic::error(
                "M006",
                format!("`cake {}` was killed by {}", mode.name(), isolate::signal_name(sig)),
                Span::default(),
                "",
            )
            .with_note(outcome.stderr.clone())
            .with_help("this is a bug in `cake`; please report it with the program");
            return refusal(mode.name(), &d);
        }
    };
    let no_toolchain = !records.is_empty()
        && records.iter().all(|(_, r)| r.error.as_ref().is_some_and(|e| e.class == "build_N001"));
    let mut value = json!({
        "exit": code,
        "runs": records.len(),
        "evidence": evidence.display().to_string(),
        "table": outcome.stdout,
        "log": outcome.stderr,
    });
    let status = match code {
        0 => "passed",
        3 => {
            // Every run skipped: say why, from the records' error class.
            let class = records.iter().find_map(|(_, r)| r.error.as_ref().map(|e| e.class.clone()));
            value["skipped"] = json!(match class.as_deref() {
                Some("no_gpu") | None => "no GPU".to_string(),
                Some("arch") => "this machine's GPU cannot run the program's target".to_string(),
                Some(other) => other.replace('_', " "),
            });
            "skipped"
        }
        1 if no_toolchain => {
            value["skipped"] = json!("no CUDA toolchain");
            value["code"] = json!("N001");
            "skipped"
        }
        1 => "failed",
        _ => {
            let d = Diagnostic::error(
                "M004",
                format!("`cake {}` refused the arguments (exit {code})", mode.name()),
                Span::default(),
                "",
            )
            .with_note(outcome.stderr.trim().to_string())
            .with_help("fix what the note says (a shape, distribution or workload spec), then call again");
            return refusal(mode.name(), &d);
        }
    };
    // A run that finished is an answer, whatever its verdicts: `status` and `verdicts` say how
    // it went; only a refused or unfinished call is a tool error.
    let verdicts: Vec<&str> = records.iter().map(|(_, r)| r.verdict.name()).collect();
    value["status"] = json!(status);
    value["verdicts"] = json!(verdicts);
    value["records"] = records.into_iter().map(|(v, _)| v).collect();
    Reply::ok(value)
}
