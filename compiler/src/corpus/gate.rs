//! Running the gate: the selected tiers of the selected cases, in parallel (rayon), each attempt
//! under a time limit, failures and timeouts retried once.

use std::io::IsTerminal;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use crate::verify::Validated;

use super::results::{CaseResult, GateResults, Observed, Status};
use super::tiers::{self, CompileBackend, Frontend, GpuBackend, Outcome};
use super::{Case, Corpus, Selection, Tier};

/// Everything a gate run needs besides the corpus.
#[derive(Clone)]
pub struct GateConfig {
    /// Tiers to run (a case runs those of them its manifest lists).
    pub tiers: Vec<Tier>,
    pub selection: Selection,
    /// Worker threads (0: one per core).
    pub jobs: usize,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    pub frontend: Frontend,
    pub compile: Arc<dyn CompileBackend>,
    pub gpu: Arc<dyn GpuBackend>,
    /// Time limit of one attempt, per tier.
    pub timeout_static: Duration,
    pub timeout_compile: Duration,
    pub timeout_gpu: Duration,
}

impl Default for GateConfig {
    fn default() -> GateConfig {
        GateConfig {
            tiers: vec![Tier::Static],
            selection: Selection::default(),
            jobs: 0,
            progress: true,
            frontend: Frontend::default(),
            compile: Arc::new(tiers::BuiltinCompile),
            gpu: Arc::new(tiers::BuiltinGpu::default()),
            timeout_static: Duration::from_secs(30),
            timeout_compile: Duration::from_secs(180),
            timeout_gpu: Duration::from_secs(300),
        }
    }
}

/// Run `f` on its own thread and wait at most `limit`. A panic becomes `Err`; on timeout the
/// thread is left to finish on its own (its result is dropped).
fn with_limit<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Attempt> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("corpus-case".into()).stack_size(16 << 20).spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    if let Err(e) = spawned {
        return Err(Attempt::Panic(format!("cannot start a worker thread: {e}")));
    }
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(payload)) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(Attempt::Panic(msg))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Attempt::Timeout),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(Attempt::Panic("the worker thread died".into())),
    }
}

enum Attempt {
    Timeout,
    Panic(String),
}

/// One tier of one case with its retry: a failure, a timeout or an out-of-memory is tried once
/// more. A failure that then passes is flaky (spurious); a timeout or OOM twice is spurious; a
/// timeout followed by a definite result takes that result.
fn run_tier(limit: Duration, attempt: impl Fn() -> (Outcome, Option<Validated>)) -> (Status, String, Observed, u32, Option<Validated>) {
    let first = attempt();
    match first.0 {
        Outcome::Pass { observed, note } => (Status::Pass, note, observed, 1, first.1),
        Outcome::Skipped(why) => (Status::Skipped, why, Observed::default(), 1, first.1),
        Outcome::Error(why) => (Status::Error, why, Observed::default(), 1, first.1),
        Outcome::Fail { reason, observed } => {
            let second = attempt();
            match second.0 {
                Outcome::Pass { observed: o2, .. } => {
                    (Status::Spurious, format!("flaky: failed ({reason}), then passed on the retry"), o2, 2, second.1)
                }
                Outcome::Fail { observed: o2, reason: r2 } if o2 == observed => (Status::Fail, r2, o2, 2, second.1),
                Outcome::Fail { reason: r2, observed: o2 } => {
                    (Status::Spurious, format!("flaky: failed twice with different observations ({reason} / {r2})"), o2, 2, second.1)
                }
                Outcome::Timeout(_) | Outcome::OutOfMemory(_) => (
                    Status::Spurious,
                    format!("flaky: failed ({reason}), then timed out or ran out of memory on the retry"),
                    observed,
                    2,
                    first.1,
                ),
                Outcome::Error(e) => (Status::Error, e, observed, 2, first.1),
                Outcome::Skipped(s) => (Status::Spurious, format!("flaky: failed ({reason}), then skipped ({s})"), observed, 2, first.1),
            }
        }
        Outcome::Timeout(ref why) | Outcome::OutOfMemory(ref why) => {
            let kind = if matches!(first.0, Outcome::Timeout(_)) {
                format!("timed out (limit {} s)", limit.as_secs())
            } else {
                "ran out of memory".to_string()
            };
            let why = why.clone();
            let second = attempt();
            match second.0 {
                Outcome::Pass { observed, note } => {
                    (Status::Pass, join(&format!("retried: the first attempt {kind}"), &note), observed, 2, second.1)
                }
                Outcome::Fail { reason, observed } => {
                    (Status::Fail, format!("{reason} (retried: the first attempt {kind})"), observed, 2, second.1)
                }
                Outcome::Timeout(w2) | Outcome::OutOfMemory(w2) => {
                    (Status::Spurious, format!("{kind} twice: {}", if w2.is_empty() { why } else { w2 }), Observed::default(), 2, None)
                }
                Outcome::Error(e) => (Status::Error, e, Observed::default(), 2, None),
                Outcome::Skipped(s) => (Status::Skipped, s, Observed::default(), 2, None),
            }
        }
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}; {b}"),
    }
}

/// Run one case: its selected tiers in order (static, compile, gpu); the later tiers use the
/// program the front end validated.
fn run_case(case: &Case, cfg: &GateConfig) -> Vec<CaseResult> {
    let wants = |t: Tier| cfg.tiers.contains(&t) && case.has_tier(t);
    let mut out = Vec::new();
    let validated: Option<Validated>;
    let need_front = wants(Tier::Static) || wants(Tier::Compile) || wants(Tier::Gpu);
    if !need_front {
        return out;
    }
    let warn = case.warnings.join("; ");

    // Static (run for the later tiers even when not recorded).
    {
        let start = Instant::now();
        let (c, fe, limit) = (Arc::new(case.clone()), cfg.frontend.clone(), cfg.timeout_static);
        let attempt = || match with_limit(limit, {
            let (c, fe) = (c.clone(), fe.clone());
            move || tiers::run_static(&c, &fe)
        }) {
            Ok(r) => r,
            Err(Attempt::Timeout) => (Outcome::Timeout(String::new()), None),
            Err(Attempt::Panic(m)) => (Outcome::Error(format!("the compiler panicked: {m}")), None),
        };
        let (status, reason, observed, attempts, v) = run_tier(limit, attempt);
        validated = v;
        if wants(Tier::Static) {
            out.push(CaseResult {
                id: case.id.clone(),
                family: case.family.clone(),
                tier: Tier::Static,
                status,
                reason: join(&reason, &warn),
                duration_ms: ms(start),
                attempts,
                observed,
            });
        }
    }

    if wants(Tier::Compile) {
        let start = Instant::now();
        let (c, v, be, limit) = (Arc::new(case.clone()), validated.clone(), cfg.compile.clone(), cfg.timeout_compile);
        let attempt = || {
            let (c, v, be) = (c.clone(), v.clone(), be.clone());
            match with_limit(limit, move || tiers::run_compile(&c, v.as_ref(), be.as_ref())) {
                Ok(o) => (o, None),
                Err(Attempt::Timeout) => (Outcome::Timeout(String::new()), None),
                Err(Attempt::Panic(m)) => (Outcome::Error(format!("the compiler panicked: {m}")), None),
            }
        };
        let (status, reason, observed, attempts, _) = run_tier(limit, attempt);
        out.push(CaseResult {
            id: case.id.clone(),
            family: case.family.clone(),
            tier: Tier::Compile,
            status,
            reason,
            duration_ms: ms(start),
            attempts,
            observed,
        });
    }

    if wants(Tier::Gpu) {
        let start = Instant::now();
        let limit = cfg.timeout_gpu;
        let (c, v, be) = (Arc::new(case.clone()), validated.clone(), cfg.gpu.clone());
        let attempt = || {
            let (c, v, be) = (c.clone(), v.clone(), be.clone());
            match with_limit(limit, move || tiers::run_gpu(&c, v.as_ref(), be.as_ref())) {
                Ok(o) => (o, None),
                Err(Attempt::Timeout) => (Outcome::Timeout(String::new()), None),
                Err(Attempt::Panic(m)) => (Outcome::Error(format!("the harness panicked: {m}")), None),
            }
        };
        let (status, reason, observed, attempts, _) = run_tier(limit, attempt);
        out.push(CaseResult {
            id: case.id.clone(),
            family: case.family.clone(),
            tier: Tier::Gpu,
            status,
            reason,
            duration_ms: ms(start),
            attempts,
            observed,
        });
    }
    out
}

fn ms(start: Instant) -> f64 {
    (start.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// Run the gate over `corpus` and return every result (not yet classified).
pub fn run(corpus: &Corpus, cfg: &GateConfig) -> GateResults {
    let start = Instant::now();
    let mut results = GateResults::new(cfg.tiers.clone());
    results.shard = cfg.selection.shard.map(|(i, n)| format!("{i}/{n}"));
    results.families = cfg.selection.families.clone();
    results.case_filters = cfg.selection.cases.clone();
    results.environment.insert(
        "static".into(),
        if cfg.frontend.is_builtin() {
            "built-in catalog, targets and verifier".into()
        } else {
            format!("replaced: {}", cfg.frontend.description.join(", "))
        },
    );
    if cfg.tiers.contains(&Tier::Compile) {
        results.environment.insert("compile".into(), cfg.compile.availability().environment());
    }
    if cfg.tiers.contains(&Tier::Gpu) {
        results.environment.insert("gpu".into(), cfg.gpu.availability().environment());
    }

    // Load errors of selected cases become error results.
    let first_tier = *cfg.tiers.iter().min().unwrap_or(&Tier::Static);
    for e in &corpus.errors {
        if cfg.selection.selects(&e.id, &e.family) {
            results.results.push(CaseResult {
                id: e.id.clone(),
                family: e.family.clone(),
                tier: first_tier,
                status: Status::Error,
                reason: format!("cannot load: {}", e.message),
                duration_ms: 0.0,
                attempts: 1,
                observed: Observed::default(),
            });
        }
    }

    let cases: Vec<&Case> = corpus.cases.iter().filter(|c| cfg.selection.selects(&c.id, &c.family)).collect();
    let bar = if cfg.progress && std::io::stderr().is_terminal() {
        let b = ProgressBar::with_draw_target(Some(cases.len() as u64), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{prefix:>8} [{bar:40}] {pos}/{len} {elapsed_precise} {wide_msg}") {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_prefix("corpus");
        b
    } else {
        ProgressBar::hidden()
    };
    let work = || -> Vec<CaseResult> {
        cases
            .par_iter()
            .flat_map_iter(|c| {
                let r = run_case(c, cfg);
                bar.set_message(c.id.clone());
                bar.inc(1);
                r
            })
            .collect()
    };
    let ran = match rayon::ThreadPoolBuilder::new().num_threads(cfg.jobs).build() {
        Ok(pool) => pool.install(work),
        Err(_) => work(),
    };
    bar.finish_and_clear();
    results.results.extend(ran);
    results.sort();
    results.wall_s = (start.elapsed().as_secs_f64() * 1e3).round() / 1e3;
    results
}
