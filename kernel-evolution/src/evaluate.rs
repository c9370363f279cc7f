//! Stage 4, evaluate on the GPU: for one candidate, `cake run` over every contract shape ×
//! distribution against the oracle, then `cake bench` at the headline shape (with cuBLAS timed in
//! the same process when the contract permits it), then each command peer. Every step is a child
//! process with a wall-clock limit; `cake run` itself runs each shape in its own child with the
//! contract's per-run timeout, flushes L2 before every timed sample and poisons outputs.
//!
//! With `evaluation.sweep = "improvements"` the headline comes first (checked against the oracle
//! on its own input seed, and timed), and only a candidate faster than the best fully checked one
//! gets the sweep; the others are `timed`: ranked by their time, never reported as the best.
//!
//! Exit codes of `cake run` / `cake bench`: 0 passed, 1 a run failed, 2 usage, 3 no GPU (skipped).
//! A run that could not happen for the harness's own reasons (no GPU, no NVRTC) makes the
//! evaluation `skipped`, never `passed`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cake::runtime::job::Verdict;
use cake::runtime::record::RunRecord;
use serde_json::{json, Map, Value};

use crate::contract::{shape_text, Contract, PeerKind, Sweep};
use crate::db::{now_ms, EvaluationRow};
use crate::error::{KevoError, Result};

/// Record classes that mean the GPU stage could not run here: no device, no driver, no NVRTC.
pub const SKIP_CLASSES: &[&str] = &["no_gpu", "driver_library", "build_N001"];

pub struct Evaluator<'c> {
    pub contract: &'c Contract,
    pub cake: PathBuf,
    pub work: PathBuf,
    /// Input seed of the correctness runs; the headline check uses the next one, so a result is
    /// compared on two input sets.
    pub input_seed: u64,
    /// A command peer's headline time, measured once per invocation (one device session): a peer
    /// does not change between candidates, and starting one (Python, torch, a Triton JIT) costs
    /// more GPU-machine time than a candidate's own evaluation.
    /// Held while a peer is measured, so workers on several GPUs measure it once.
    pub peer_times: std::sync::Mutex<std::collections::BTreeMap<String, Value>>,
    /// `--rules` for every `cake` call, so the GPU stage verifies with the gates' rule set.
    pub rules_dir: Option<PathBuf>,
}

/// The `cake` binary: `CAKE_BIN`, else `cake` (or `cake-device`) beside this executable.
pub fn find_cake() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CAKE_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(KevoError::new("K301", p.display().to_string(), "CAKE_BIN does not name a file", "set CAKE_BIN to the `cake` binary, or unset it"))
        };
    }
    let exe = std::env::current_exe().map_err(|e| KevoError::new("K301", "cake-evolve-kernel", format!("cannot find this executable: {e}"), "set CAKE_BIN to the `cake` binary"))?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    // Integration tests run from target/<profile>/deps; the binaries sit one level up.
    for d in [dir.clone(), dir.join("..")] {
        for name in ["cake", "cake-device"] {
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(KevoError::new("K301", dir.display().to_string(), "no `cake` binary beside cake-evolve-kernel", "build it (`cargo build -p cake`) or set CAKE_BIN"))
}

/// What one child process did.
pub struct ChildRun {
    pub code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub seconds: f64,
}

pub fn run_child(mut cmd: Command, limit: Duration) -> std::io::Result<ChildRun> {
    // Workers on several GPUs start children in the same millisecond: a counter keeps their
    // output files apart.
    static CHILDREN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let start = Instant::now();
    let dir = std::env::temp_dir();
    let stamp = format!("{}-{}-{}", std::process::id(), now_ms(), CHILDREN.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let (out_path, err_path) = (dir.join(format!("kevo-{stamp}.out")), dir.join(format!("kevo-{stamp}.err")));
    cmd.stdin(Stdio::null()).stdout(std::fs::File::create(&out_path)?).stderr(std::fs::File::create(&err_path)?);
    let mut child = cmd.spawn()?;
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    Ok(ChildRun { code: status.and_then(|s| s.code()), timed_out, stdout, stderr, seconds: start.elapsed().as_secs_f64() })
}

/// The run records a `cake` call wrote under `evidence/runs/`, with their file paths (the
/// runtime's reader; an unreadable directory is no records).
pub fn read_records(evidence: &Path) -> Vec<(PathBuf, RunRecord)> {
    cake::runtime::record::read_records(evidence).unwrap_or_default()
}

pub struct Evaluation {
    pub row: EvaluationRow,
    /// The run-record files, for routing.
    pub record_files: Vec<PathBuf>,
    /// A `cake` child was killed by a signal (not by its wall limit): the worker died, which says
    /// nothing about the candidate, so the evaluation is tried again on another GPU.
    pub died: bool,
}

impl Evaluator<'_> {
    fn cake_cmd(&self, sub: &str, program: &Path, workload: &Path, evidence: &Path, seed: u64, gpu: Option<&str>) -> Command {
        let mut c = Command::new(&self.cake);
        if let Some(g) = gpu {
            c.env("CUDA_VISIBLE_DEVICES", g);
        }
        c.arg(sub)
            .arg(program)
            .arg("--workload")
            .arg(workload)
            .arg("--evidence")
            .arg(evidence)
            .arg("--seed")
            .arg(seed.to_string())
            .arg("--timeout")
            .arg(self.contract.file.evaluation.run_timeout_s.to_string())
            .arg("--max-timeouts")
            .arg("1")
            .arg("--color")
            .arg("never");
        if let Some(dir) = &self.rules_dir {
            c.arg("--rules").arg(dir);
        }
        c
    }

    /// Wall limit of one `cake` call: every run's own limit, plus set-up.
    fn call_limit(&self, runs: usize) -> Duration {
        let per = self.contract.file.evaluation.run_timeout_s;
        // 30 s of set-up per call (NVRTC build, context creation) beyond the runs' own limits.
        Duration::from_secs(per * runs.max(1) as u64 + 30)
    }

    /// `best_passed_ms`: the fastest headline time of a fully checked candidate so far, which
    /// `sweep = "improvements"` must beat before it spends the correctness sweep.
    /// `gpu`: the GPU (an id for CUDA_VISIBLE_DEVICES) every child of this evaluation runs on;
    /// `None` leaves the environment's.
    pub fn evaluate(&self, seq: i64, text: &str, hash: &str, compiler_commit: &str, best_passed_ms: Option<f64>, gpu: Option<&str>) -> Result<Evaluation> {
        let dir = self.work.join(format!("cand-{seq:05}-{}", &hash[..12]));
        let evidence = dir.join("evidence");
        // A scratch directory of an attempt that was killed is ours to clear: its records were
        // never routed and the evaluation was never committed.
        let _ = std::fs::remove_dir_all(&dir);
        let werr = |e: std::io::Error| KevoError::new("K204", dir.display().to_string(), format!("cannot write the candidate's work directory: {e}"), "give a writable `--work` directory");
        std::fs::create_dir_all(&evidence).map_err(werr)?;
        let program = dir.join("candidate.cake");
        let workload = dir.join("workload.toml");
        std::fs::write(&program, text).map_err(werr)?;
        std::fs::write(&workload, self.contract.workload_toml()).map_err(werr)?;

        let w = &self.contract.file.workload;
        let runs = w.shapes.len() * w.distributions.len().max(1);
        let mut gpu_seconds = 0.0;
        let mut notes: Vec<String> = Vec::new();
        let spawn_err = |e: std::io::Error| KevoError::new("K301", self.cake.display().to_string(), format!("cannot run `cake`: {e}"), "set CAKE_BIN to a working `cake` binary");

        let cublas = self.contract.file.references.iter().any(|r| r.kind == PeerKind::Cublas);
        let died = std::cell::Cell::new(false);
        let watch = |r: ChildRun| {
            died.set(died.get() || (r.code.is_none() && !r.timed_out));
            r
        };
        let bench = || -> Result<ChildRun> {
            let mut cmd = self.cake_cmd("bench", &program, &workload, &evidence, self.input_seed + 1, gpu);
            cmd.arg("--baseline").arg(if cublas { "cublas" } else { "none" });
            cmd.arg("--repeats").arg(self.contract.file.evaluation.bench_repeats.to_string());
            run_child(cmd, self.call_limit(1)).map(watch).map_err(spawn_err)
        };
        let sweep = || run_child(self.cake_cmd("run", &program, &workload, &evidence, self.input_seed, gpu), self.call_limit(runs)).map(watch).map_err(spawn_err);
        let mut exit: Option<i32>;
        let mut status;
        match self.contract.file.evaluation.sweep {
            Sweep::Every => {
                let r = sweep()?;
                gpu_seconds += r.seconds;
                exit = r.code;
                status = exit_status(&r);
                if r.timed_out {
                    notes.push("cake run exceeded its wall limit".into());
                }
                if status == "passed" {
                    let b = bench()?;
                    gpu_seconds += b.seconds;
                    status = exit_status(&b);
                    if b.timed_out {
                        notes.push("cake bench exceeded its wall limit".into());
                    }
                }
            }
            Sweep::Improvements => {
                let b = bench()?;
                gpu_seconds += b.seconds;
                exit = b.code;
                status = exit_status(&b);
                if b.timed_out {
                    notes.push("cake bench exceeded its wall limit".into());
                }
                let timed = read_records(&evidence).iter().find(|(_, r)| r.command == "bench" && r.verdict == Verdict::Pass).and_then(|(_, r)| r.times_ms.as_ref().map(|t| t.median_ms));
                if status == "passed" {
                    match (timed, best_passed_ms) {
                        (Some(t), Some(best)) if t >= best => {
                            status = "timed";
                            notes.push(format!("checked and timed at the headline only: {t:.4} ms is not faster than the best fully checked {best:.4} ms"));
                        }
                        _ => {
                            let r = sweep()?;
                            gpu_seconds += r.seconds;
                            exit = r.code;
                            status = exit_status(&r);
                            if r.timed_out {
                                notes.push("cake run exceeded its wall limit".into());
                            }
                        }
                    }
                }
            }
        }
        let records = read_records(&evidence);
        // Records explain what the exit code summarized: harness classes make it a skip.
        let classes: Vec<&str> = records.iter().filter_map(|(_, r)| r.error.as_ref().map(|e| e.class.as_str())).collect();
        if status != "passed" && !classes.is_empty() && classes.iter().all(|c| SKIP_CLASSES.contains(c)) {
            status = "skipped";
        } else if status == "failed" && !classes.is_empty() && classes.iter().all(|c| cake_evolve::mine::HARNESS_CLASSES.contains(c)) {
            // A bad workload or an I/O failure is the harness's, not the candidate's.
            status = "error";
        }
        let mut verdicts = Vec::new();
        let mut measured = Map::new();
        let mut headline_ms = None;
        let mut peers = Map::new();
        for (_, r) in &records {
            verdicts.push(json!({
                "command": r.command,
                "shape": shape_text(&r.shape),
                "dist": r.dist,
                "verdict": r.verdict.name(),
                "class": r.error.as_ref().map(|e| e.class.clone()),
            }));
            if r.verdict == Verdict::Pass {
                if let Some(t) = &r.times_ms {
                    if r.command == "bench" {
                        headline_ms = Some(t.median_ms);
                        if let Some(b) = &r.baseline {
                            peers.insert(b.name.clone(), json!({ "median_ms": b.times_ms.median_ms, "speedup": b.speed_ratio }));
                        }
                    } else {
                        measured.insert(format!("{}|{}", shape_text(&r.shape), r.dist), json!(t.median_ms));
                    }
                }
            }
        }
        if (status == "passed" || status == "timed") && headline_ms.is_none() {
            status = "error";
            notes.push("cake bench passed but wrote no timed record".into());
        }
        if status == "passed" || status == "timed" {
            let ms = headline_ms.unwrap_or(f64::NAN);
            for p in self.contract.file.references.iter().filter(|r| r.kind == PeerKind::Command) {
                let mut times = self.peer_times.lock().unwrap_or_else(|e| e.into_inner());
                let measured = match times.get(&p.name).cloned() {
                    Some(v) => v,
                    None => {
                        let (v, secs) = self.run_peer(&p.command, gpu);
                        gpu_seconds += secs;
                        times.insert(p.name.clone(), v.clone());
                        v
                    }
                };
                drop(times);
                let value = match measured.get("median_ms").and_then(Value::as_f64) {
                    Some(peer) => json!({ "median_ms": peer, "speedup": peer / ms }),
                    None => measured,
                };
                peers.insert(p.name.clone(), value);
            }
        }
        let row = EvaluationRow {
            seq,
            status: status.to_string(),
            verdicts: json!({ "runs": verdicts, "notes": notes, "exit": exit }),
            measured: Value::Object(measured),
            headline_ms,
            peers: Value::Object(peers),
            gpu_seconds,
            records: records.iter().filter_map(|(p, _)| p.file_stem().map(|s| s.to_string_lossy().into_owned())).collect(),
            contract_hash: self.contract.hash.clone(),
            compiler_commit: compiler_commit.to_string(),
            finished_unix_ms: now_ms(),
        };
        Ok(Evaluation { row, record_files: records.into_iter().map(|(p, _)| p).collect(), died: died.get() })
    }

    /// A command peer at the headline shape: its arguments' `{DIM}` and `{REPEATS}` are filled in,
    /// it also finds `CAKE_SHAPE` (`B=32,N=…`) and `CAKE_REPEATS` in its environment, and prints
    /// `{"median_ms": …}` as its last stdout line.
    fn run_peer(&self, command: &[String], gpu: Option<&str>) -> (Value, f64) {
        let Some(program) = command.first().and_then(|p| self.contract.resolve_program(p)) else {
            return (json!({ "skipped": "peer program not found" }), 0.0);
        };
        let mut c = Command::new(program);
        c.args(command[1..].iter().map(|a| self.contract.peer_arg(a)))
            .current_dir(self.contract.dir())
            .env("CAKE_SHAPE", shape_text(&self.contract.file.workload.headline))
            .env("CAKE_REPEATS", self.contract.file.evaluation.bench_repeats.to_string());
        if let Some(g) = gpu {
            c.env("CUDA_VISIBLE_DEVICES", g);
        }
        let limit = Duration::from_secs(self.contract.file.evaluation.run_timeout_s);
        match run_child(c, limit) {
            Err(e) => (json!({ "skipped": format!("cannot start: {e}") }), 0.0),
            Ok(r) if r.timed_out => (json!({ "skipped": "timed out" }), r.seconds),
            Ok(r) => {
                let last = r.stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                match serde_json::from_str::<Value>(last).ok().and_then(|v| v.get("median_ms").and_then(Value::as_f64)) {
                    Some(ms) if r.code == Some(0) => (json!({ "median_ms": ms }), r.seconds),
                    _ => (json!({ "skipped": format!("exit {:?}, no `median_ms` line: {}", r.code, r.stderr.lines().last().unwrap_or("")) }), r.seconds),
                }
            }
        }
    }
}

fn exit_status(r: &ChildRun) -> &'static str {
    if r.timed_out {
        return "failed";
    }
    match r.code {
        Some(0) => "passed",
        Some(1) => "failed",
        Some(3) => "skipped",
        _ => "error",
    }
}
