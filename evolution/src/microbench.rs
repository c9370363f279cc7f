//! Recalibration from a microbenchmark suite written in Cake IR.
//!
//! A suite (`calibration/microbench/<target>/suite.toml`) lists benches — Cake programs, the
//! shapes they run at, and the cost-model parameters each one isolates — and the accuracy set:
//! GPU corpus cases timed at a few shapes, on which the fit is judged (they never take part in
//! it). `cake-evolve-compiler calibrate --target T` runs every program with `cake run` on this
//! machine's GPU (each run in its own child process, checked by its workload's oracle, timed after
//! an L2 flush), fits each bench's parameters in suite order, and measures the accuracy before and
//! after; `queue::propose_suite_calibration` turns that into a proposal.
//!
//! The fit is the cost model's own: for a bench's parameter `p`, the value is the one for which
//! `cake::cost::estimate` of the bench's programs best matches their measured times (least mean
//! absolute log error, a log-spaced grid over ×1/16..×16 refined around the best point). A bench
//! whose predictions do not move with `p` is an error — it would "fit" noise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cake::cost::Calibration;
use cake::runtime::record::RunRecord;
use cake::runtime::workload::Shape;
use serde::{Deserialize, Serialize};

pub use cake::cost::accuracy::{BenchMeasurement, SavedRun, RUN_SCHEMA};
use crate::calibrate::{fmt_num, round4, round_sig, set_meta, set_param, validated, CalibrationDraft, Measurement, ParamFit};

/// One bench of a suite.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bench {
    pub name: String,
    /// One line: what is measured and why these programs isolate it.
    pub measures: String,
    /// Program files, relative to the suite file.
    pub programs: Vec<String>,
    /// The workload, relative to the suite file (default: each program's `.workload.toml`).
    #[serde(default)]
    pub workload: Option<String>,
    /// Dims every program of the bench runs at.
    pub shapes: Vec<Shape>,
    /// Cost-model parameters fitted from this bench, in order.
    pub fits: Vec<String>,
    #[serde(default = "default_repeats")]
    pub repeats: u32,
}

fn default_repeats() -> u32 {
    5
}

/// A probe of a term the cost model does not have yet (`[[unfitted]]`): its programs isolate the
/// term, but there is no parameter to fit, so `calibrate` neither runs nor fits it
/// (scripts/device-cost-accuracy.sh times it). `needs` names the parameters the model would need
/// (none may exist yet: once one does, the probe becomes a `[[bench]]` that fits it); `informs`
/// names existing parameters its times also bear on.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Unfitted {
    pub name: String,
    pub measures: String,
    pub programs: Vec<String>,
    #[serde(default)]
    pub workload: Option<String>,
    pub shapes: Vec<Shape>,
    pub needs: Vec<String>,
    #[serde(default)]
    pub informs: Vec<String>,
    #[serde(default = "default_repeats")]
    pub repeats: u32,
}

/// Programs the fit is judged on: accepted GPU-tier corpus cases of some families, each run
/// under its own manifest's workload (oracle, inputs, tolerance) at these shapes.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracySet {
    /// Corpus families (`cake corpus list`), e.g. `gemm-sm90-ws`.
    pub families: Vec<String>,
    pub shapes: Vec<Shape>,
    #[serde(default = "default_repeats")]
    pub repeats: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    target: String,
    #[serde(default)]
    bench: Vec<Bench>,
    #[serde(default)]
    accuracy: Vec<AccuracySet>,
    #[serde(default)]
    unfitted: Vec<Unfitted>,
}

/// A loaded, validated suite.
#[derive(Clone, Debug)]
pub struct Suite {
    pub path: PathBuf,
    pub target: String,
    pub benches: Vec<Bench>,
    pub accuracy: Vec<AccuracySet>,
    /// Probes of terms the model lacks; never run or fitted by `calibrate`.
    pub unfitted: Vec<Unfitted>,
}

impl Suite {
    /// The default suite of `target` in a checkout.
    pub fn default_path(root: &Path, target: &str) -> PathBuf {
        root.join("calibration/microbench").join(target).join("suite.toml")
    }

    pub fn load(path: &Path) -> Result<Suite, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the microbenchmark suite {}: {e}", path.display()))?;
        let f: SuiteFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let s = Suite { path: path.to_path_buf(), target: f.target, benches: f.bench, accuracy: f.accuracy, unfitted: f.unfitted };
        s.validate()?;
        Ok(s)
    }

    fn dir(&self) -> PathBuf {
        self.path.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    pub fn file(&self, rel: &str) -> PathBuf {
        self.dir().join(rel)
    }

    /// The workload of `program` in `bench`.
    pub fn workload_of(&self, bench: &Bench, program: &str) -> PathBuf {
        self.workload_file(bench.workload.as_deref(), program)
    }

    fn workload_file(&self, workload: Option<&str>, program: &str) -> PathBuf {
        match workload {
            Some(w) => self.file(w),
            None => self.file(&format!("{}.workload.toml", program.trim_end_matches(".cake"))),
        }
    }

    fn validate(&self) -> Result<(), String> {
        let at = self.path.display();
        if self.benches.is_empty() {
            return Err(format!("{at}: the suite has no [[bench]]"));
        }
        let known = cake::cost::calibration::names();
        let mut names = std::collections::BTreeSet::new();
        for b in &self.benches {
            if !names.insert(b.name.as_str()) {
                return Err(format!("{at}: two benches are named `{}`", b.name));
            }
            if b.programs.is_empty() || b.shapes.is_empty() || b.fits.is_empty() {
                return Err(format!("{at}: bench `{}` needs programs, shapes and fits", b.name));
            }
            for p in &b.fits {
                if !known.contains(&p.as_str()) {
                    let hint = cake::diag::closest(p, known.iter().copied()).map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default();
                    return Err(format!("{at}: bench `{}` fits `{p}`, which is not a cost-model parameter{hint}", b.name));
                }
            }
            for prog in &b.programs {
                for f in [self.file(prog), self.workload_of(b, prog)] {
                    if !f.is_file() {
                        return Err(format!("{at}: bench `{}`: {} does not exist", b.name, f.display()));
                    }
                }
            }
        }
        for u in &self.unfitted {
            if !names.insert(u.name.as_str()) {
                return Err(format!("{at}: two benches are named `{}`", u.name));
            }
            if u.programs.is_empty() || u.shapes.is_empty() || u.needs.is_empty() {
                return Err(format!("{at}: [[unfitted]] `{}` needs programs, shapes and needs", u.name));
            }
            for p in &u.needs {
                if known.contains(&p.as_str()) {
                    return Err(format!("{at}: [[unfitted]] `{}` needs `{p}`, which is a cost-model parameter now: make it a [[bench]] that fits it", u.name));
                }
            }
            for p in &u.informs {
                if !known.contains(&p.as_str()) {
                    return Err(format!("{at}: [[unfitted]] `{}` informs `{p}`, which is not a cost-model parameter", u.name));
                }
            }
            for prog in &u.programs {
                for f in [self.file(prog), self.workload_file(u.workload.as_deref(), prog)] {
                    if !f.is_file() {
                        return Err(format!("{at}: [[unfitted]] `{}`: {} does not exist", u.name, f.display()));
                    }
                }
            }
        }
        for a in &self.accuracy {
            if a.families.is_empty() || a.shapes.is_empty() {
                return Err(format!("{at}: an [[accuracy]] set needs families and shapes"));
            }
        }
        Ok(())
    }
}

/// Why a measurement run could not be made.
#[derive(Debug)]
pub enum RunSuiteError {
    /// No GPU on this machine (`cake run` exited 3).
    NoGpu(String),
    Other(String),
}

impl std::fmt::Display for RunSuiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunSuiteError::NoGpu(why) => write!(
                f,
                "calibrate runs its microbenchmark suite on the GPU, and this machine has none ({why}). Run it on a GPU machine \
                 (with --save-measurements FILE to carry the times here), then `calibrate --from-saved FILE`; or refit from \
                 existing measurements with --measurements FILE"
            ),
            RunSuiteError::Other(m) => f.write_str(m),
        }
    }
}

/// Runs programs with the `cake` binary.
pub struct CakeRunner {
    pub exe: PathBuf,
    /// Per run (one shape), passed to `cake run --timeout`.
    pub timeout_s: u64,
    /// Stop starting new runs after this long; what ran is kept.
    pub deadline: Duration,
    pub started: Instant,
    pub verbose: bool,
}

/// One timed run.
struct Timed {
    dims: Shape,
    median_ms: f64,
    gpu: Option<String>,
}

impl CakeRunner {
    /// `cake` beside this executable, or `$CAKE_BIN`.
    pub fn locate(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
        if let Some(p) = explicit.or_else(|| std::env::var_os("CAKE_BIN").map(PathBuf::from)) {
            return if p.is_file() { Ok(p) } else { Err(format!("the cake binary {} does not exist", p.display())) };
        }
        let sibling = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("cake")));
        sibling.filter(|p| p.is_file()).ok_or_else(|| "cannot find the `cake` binary beside this program: build it (`cargo build --release -p cake`) or pass --cake PATH / set CAKE_BIN".into())
    }

    fn out_of_time(&self) -> bool {
        self.started.elapsed() >= self.deadline
    }

    /// `cake run PROGRAM` at every shape; the passing runs' median times.
    fn time(&self, program: &Path, workload: &Path, shapes: &[Shape], repeats: u32, failed: &mut Vec<String>) -> Result<Vec<Timed>, RunSuiteError> {
        let evidence = tempfile::tempdir().map_err(|e| RunSuiteError::Other(format!("cannot make a temporary directory: {e}")))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run").arg(program).arg("--workload").arg(workload).arg("--evidence").arg(evidence.path());
        cmd.args(["--dist", "normal", "--no-cublas-check", "--max-timeouts", "1"]);
        cmd.arg("--repeats").arg(repeats.to_string()).arg("--timeout").arg(self.timeout_s.to_string());
        for s in shapes {
            cmd.arg("--shape").arg(shape_text(s));
        }
        let out = cmd.output().map_err(|e| RunSuiteError::Other(format!("cannot run {}: {e}", self.exe.display())))?;
        let label = program.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
        if out.status.code() == Some(3) {
            let why = String::from_utf8_lossy(&out.stderr).lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no GPU").trim().to_string();
            return Err(RunSuiteError::NoGpu(why));
        }
        let mut timed = Vec::new();
        let runs = evidence.path().join("runs");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&runs).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        files.sort();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else { continue };
            let Ok(r) = serde_json::from_str::<RunRecord>(&text) else {
                failed.push(format!("{label}: unreadable run record {}", f.display()));
                continue;
            };
            let shape = shape_text(&r.shape);
            match (&r.times_ms, format!("{:?}", r.verdict).to_lowercase().as_str()) {
                (Some(t), "pass") if t.median_ms > 0.0 => timed.push(Timed { dims: r.shape.clone(), median_ms: t.median_ms, gpu: r.gpu.as_ref().map(|g| g.name.clone()) }),
                (_, v) => failed.push(format!("{label} @ {shape}: {v}{}", r.error.as_ref().map(|e| format!(" ({}: {})", e.class, first_line(&e.message))).unwrap_or_default())),
            }
        }
        if timed.is_empty() && !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            failed.push(format!("{label}: cake run exited {} — {}", out.status.code().unwrap_or(-1), first_line(err.trim())));
        }
        if self.verbose {
            eprintln!("  {label}: {} of {} shape(s) timed ({:.0} s so far)", timed.len(), shapes.len(), self.started.elapsed().as_secs_f64());
        }
        Ok(timed)
    }
}

/// What a failed run said: its first error line, else its first line (not the `note: rules:` line
/// every run prints first, which names the checkout's path).
fn first_line(s: &str) -> String {
    let lines = || s.lines().map(str::trim).filter(|l| !l.is_empty());
    let line = lines().find(|l| l.starts_with("error")).or_else(|| lines().find(|l| !l.starts_with("note: rules:"))).unwrap_or("");
    line.chars().take(200).collect()
}

fn shape_text(s: &Shape) -> String {
    s.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Run the suite's benches and its accuracy set (corpus cases from `corpus_root`).
pub fn run_suite(suite: &Suite, corpus_root: &Path, runner: &CakeRunner) -> Result<SavedRun, RunSuiteError> {
    if !cake::corpus::tiers::gpu_present() {
        return Err(RunSuiteError::NoGpu("no NVIDIA device under /dev".into()));
    }
    let mut out = SavedRun { schema: RUN_SCHEMA.into(), target: suite.target.clone(), ..SavedRun::default() };
    let mut gpu = None;
    for b in &suite.benches {
        if runner.verbose {
            eprintln!("bench {}: {} program(s) × {} shape(s)", b.name, b.programs.len(), b.shapes.len());
        }
        for prog in &b.programs {
            if runner.out_of_time() {
                out.failed.push(format!("{}: not run, the deadline was reached", prog));
                continue;
            }
            let path = suite.file(prog);
            let source = std::fs::read_to_string(&path).map_err(|e| RunSuiteError::Other(format!("{}: {e}", path.display())))?;
            for t in runner.time(&path, &suite.workload_of(b, prog), &b.shapes, b.repeats, &mut out.failed)? {
                gpu = gpu.or(t.gpu);
                out.suite.push(BenchMeasurement { bench: b.name.clone(), m: Measurement { name: format!("{}/{prog} @ {}", b.name, shape_text(&t.dims)), program: source.clone(), dims: t.dims, measured_ms: t.median_ms } });
            }
        }
    }
    if !suite.accuracy.is_empty() {
        let corpus = cake::corpus::Corpus::load(corpus_root).map_err(|e| RunSuiteError::Other(format!("cannot load the corpus at {}: {e}", corpus_root.display())))?;
        let work = tempfile::tempdir().map_err(|e| RunSuiteError::Other(format!("cannot make a temporary directory: {e}")))?;
        for a in &suite.accuracy {
            let cases: Vec<_> = corpus
                .cases
                .iter()
                .filter(|c| a.families.contains(&c.family) && c.manifest.target == suite.target && c.manifest.expect.verdict == cake::corpus::Verdict::Accept && c.manifest.tiers.contains(&cake::corpus::Tier::Gpu))
                .collect();
            if runner.verbose {
                eprintln!("accuracy set {}: {} corpus case(s) × {} shape(s)", a.families.join(", "), cases.len(), a.shapes.len());
            }
            for case in cases {
                if runner.out_of_time() {
                    out.failed.push(format!("{}: not run, the deadline was reached", case.id));
                    continue;
                }
                let Some(w) = &case.manifest.workload else {
                    out.failed.push(format!("{}: the case has no [workload]", case.id));
                    continue;
                };
                let stem = case.id.replace('/', "__");
                let (prog, wl) = (work.path().join(format!("{stem}.cake")), work.path().join(format!("{stem}.workload.toml")));
                let wtext = toml::to_string(w).map_err(|e| RunSuiteError::Other(format!("{}: {e}", case.id)))?;
                std::fs::write(&prog, &case.source).and_then(|_| std::fs::write(&wl, wtext)).map_err(|e| RunSuiteError::Other(format!("cannot write to {}: {e}", work.path().display())))?;
                for t in runner.time(&prog, &wl, &a.shapes, a.repeats, &mut out.failed)? {
                    gpu = gpu.or(t.gpu);
                    out.accuracy.push(Measurement { name: format!("{} @ {}", case.id, shape_text(&t.dims)), program: case.source.clone(), dims: t.dims, measured_ms: t.median_ms });
                }
            }
        }
    }
    out.gpu = gpu.unwrap_or_else(|| "unknown GPU".into());
    out.created_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Ok(out)
}

/// Predicted times of `ms` under the calibration text.
fn predictions(file: &str, text: &str, ms: &[(cake::verify::Validated, &Measurement)]) -> Result<Vec<Option<f64>>, String> {
    let cal = Calibration::from_toml_str(file, text).map_err(|e| e.to_string())?;
    Ok(cake::cost::accuracy::predictions(&cal, ms))
}

/// Mean |ln(predicted / measured)| over runs (`None` where one is not predicted).
pub(crate) fn log_error(pred: &[Option<f64>], ms: &[(cake::verify::Validated, &Measurement)]) -> Option<f64> {
    let mut s = 0.0;
    for (p, (_, m)) in pred.iter().zip(ms) {
        s += ((*p)? / m.measured_ms).ln().abs();
    }
    Some(s / ms.len().max(1) as f64)
}

/// Fit one parameter over one bench's runs, starting from `text`.
pub(crate) fn fit_param(file: &str, text: &str, param: &str, bench: &str, ms: &[(cake::verify::Validated, &Measurement)], note: &str) -> Result<(String, ParamFit), String> {
    let cal = Calibration::from_toml_str(file, text).map_err(|e| e.to_string())?;
    let p0 = cal.params.get(param).ok_or_else(|| format!("the calibration has no `{param}`"))?;
    let (v0, fraction) = (p0.value, p0.unit == "fraction");
    if !(v0 > 0.0) {
        return Err(format!("`{param}` = {v0}: only positive parameters can be fitted"));
    }
    let with = |v: f64| set_param(text, param, v, "fit");
    let score = |v: f64| -> Option<(f64, Vec<Option<f64>>)> {
        let t = with(v).ok()?;
        let p = predictions(file, &t, ms).ok()?;
        Some((log_error(&p, ms)?, p))
    };
    let (e0, p_at_v0) = score(v0).ok_or_else(|| format!("bench `{bench}`: the cost model cannot predict every run of it"))?;
    // The bench must move with the parameter somewhere in the span the fit searches (×1/16..×16),
    // or the fit is of noise. Not only next to `v0`: a provisional value can sit far from where
    // its term binds (pipeline_acquire_ns's assumed 25.6 ns against bench tma-stage's ~120).
    let moved = [0.5, 2.0, 0.25, 4.0, 1.0 / 16.0, 16.0]
        .iter()
        .filter_map(|f| score(clamp(v0 * f, fraction)).map(|(_, p)| p))
        .flat_map(|p| p.into_iter().zip(&p_at_v0).map(|(a, b)| (a.unwrap_or(0.0) / b.unwrap_or(1.0)).ln().abs()).collect::<Vec<_>>())
        .fold(0.0f64, f64::max);
    if moved < 0.05 {
        return Err(format!("bench `{bench}` does not exercise `{param}`: moving it between ×1/16 and ×16 moves the model's predictions by {:.1}% at most", (moved.exp() - 1.0) * 100.0));
    }
    let span = 16f64.ln();
    let steps = 48;
    let mut best = (e0, v0);
    for i in -steps..=steps {
        let v = clamp(v0 * (span * i as f64 / steps as f64).exp(), fraction);
        if let Some((e, _)) = score(v) {
            if e < best.0 - 1e-12 {
                best = (e, v);
            }
        }
    }
    // Refine between the grid neighbours (golden section on ln v).
    let h = span / steps as f64;
    let (mut lo, mut hi) = (best.1.ln() - h, best.1.ln() + h);
    for _ in 0..40 {
        let (a, b) = (hi - (hi - lo) * 0.618, lo + (hi - lo) * 0.618);
        let ea = score(clamp(a.exp(), fraction)).map(|x| x.0).unwrap_or(f64::INFINITY);
        let eb = score(clamp(b.exp(), fraction)).map(|x| x.0).unwrap_or(f64::INFINITY);
        if ea < eb {
            hi = b;
        } else {
            lo = a;
        }
    }
    let mid = clamp(((lo + hi) / 2.0).exp(), fraction);
    if let Some((e, _)) = score(mid) {
        if e < best.0 {
            best = (e, mid);
        }
    }
    // Six significant digits: the file says what was measured, not the search's last bits.
    let after = round_sig(best.1, 6);
    let at_bound = (after / v0).ln().abs() >= span * 0.999;
    let source = format!("{note}; mean |log error| over {} run(s) of bench `{bench}` {:.3} -> {:.3}; was {}", ms.len(), e0, best.0, fmt_num(v0));
    let new_text = set_param(text, param, after, &source)?;
    let new_text = clear_provisional(&new_text, param);
    Ok((new_text, ParamFit { param: param.into(), bench: bench.into(), runs: ms.len(), before: v0, after, log_error_before: round4(e0), log_error_after: round4(best.0), at_bound }))
}

fn clamp(v: f64, fraction: bool) -> f64 {
    if fraction {
        v.min(1.0)
    } else {
        v
    }
}

/// Drop `provisional = true` from `[param.NAME]`: the value is measured now.
fn clear_provisional(text: &str, name: &str) -> String {
    let header = format!("[param.{name}]");
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            inside = t.starts_with(&header);
        }
        if inside && t.starts_with("provisional") {
            continue;
        }
        out.push(line);
    }
    out.join("\n") + "\n"
}

/// The best pair of values on a log-spaced grid (×1/8 … ×8 each, fractions capped at 1) for two
/// parameters of one bench; returns the calibration text with them.
fn joint_grid(file: &str, text: &str, a: &str, b: &str, ms: &[(cake::verify::Validated, &Measurement)]) -> Result<String, String> {
    let cal = Calibration::from_toml_str(file, text).map_err(|e| e.to_string())?;
    let base = |p: &str| cal.params.get(p).map(|x| (x.value, x.unit == "fraction")).ok_or_else(|| format!("the calibration has no `{p}`"));
    let ((va, fa), (vb, fb)) = (base(a)?, base(b)?);
    let mut best: Option<(f64, String)> = None;
    for i in -12..=12 {
        for j in -12..=12 {
            let (x, y) = (clamp(va * 2f64.powf(i as f64 / 4.0), fa), clamp(vb * 2f64.powf(j as f64 / 4.0), fb));
            let Ok(t) = set_param(text, a, x, "grid").and_then(|t| set_param(&t, b, y, "grid")) else { continue };
            let Some(e) = predictions(file, &t, ms).ok().and_then(|p| log_error(&p, ms)) else { continue };
            if best.as_ref().is_none_or(|(be, _)| e < *be - 1e-12) {
                best = Some((e, t));
            }
        }
    }
    best.map(|(_, t)| t).ok_or_else(|| format!("no pair of `{a}`, `{b}` lets the model predict every run"))
}

/// Rounds of coordinate descent for a bench that fits several parameters.
const JOINT_ROUNDS: usize = 8;

/// Fit every bench's parameters in suite order on `run.suite`, then judge on `run.accuracy`.
/// Returns the draft and the new calibration text.
pub fn fit_suite(suite: &Suite, text: &str, run: &SavedRun, fitted_on: &str) -> Result<(CalibrationDraft, String), String> {
    let target = &suite.target;
    let file = format!("calibration/{target}.toml");
    Calibration::from_toml_str(&file, text).map_err(|e| e.to_string())?;
    let mut skipped = Vec::new();
    let mut new_text = text.to_string();
    let mut fits = Vec::new();
    let mut problems = Vec::new();
    for b in &suite.benches {
        let ms = validated(target, run.suite.iter().filter(|m| m.bench == b.name).map(|m| &m.m), &mut skipped);
        if ms.is_empty() {
            problems.push(format!("bench `{}`: no timed run", b.name));
            continue;
        }
        // One parameter: one fit. Several: fitted jointly over the bench's runs, by coordinate
        // descent (each in turn, from the others' latest values) until none moves.
        let note = format!("microbench `{}` ({} run(s), {fitted_on}), fitted by cake-evolve-compiler calibrate", b.name, ms.len());
        let mut bench_fits: Vec<ParamFit> = Vec::new();
        let rounds = if b.fits.len() > 1 { JOINT_ROUNDS } else { 1 };
        // Two parameters can trade off along a valley that one-at-a-time steps cannot follow:
        // start the descent from the best point of a joint grid.
        let start_text = new_text.clone();
        if b.fits.len() == 2 {
            new_text = joint_grid(&file, &new_text, &b.fits[0], &b.fits[1], &ms)?;
        }
        'rounds: for _ in 0..rounds {
            let mut moved = false;
            for p in &b.fits {
                match fit_param(&file, &new_text, p, &b.name, &ms, &note) {
                    Ok((t, f)) => {
                        moved |= (f.after / f.before - 1.0).abs() > 1e-4;
                        new_text = t;
                        match bench_fits.iter_mut().find(|x| x.param == f.param) {
                            Some(x) => {
                                x.after = f.after;
                                x.log_error_after = f.log_error_after;
                                x.at_bound = f.at_bound;
                            }
                            None => bench_fits.push(f),
                        }
                    }
                    Err(e) => {
                        problems.push(e);
                        break 'rounds;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        if bench_fits.len() > 1 {
            let start = Calibration::from_toml_str(&file, &start_text).map_err(|e| e.to_string())?;
            let first = predictions(&file, &start_text, &ms)?;
            let e0 = log_error(&first, &ms).unwrap_or(f64::NAN);
            for f in &mut bench_fits {
                f.before = start.params[&f.param].value;
                f.log_error_before = round4(e0);
            }
            // The file says where each value came from: the joint fit, from the values before it.
            for f in &bench_fits {
                let others: Vec<&str> = b.fits.iter().map(String::as_str).filter(|p| *p != f.param).collect();
                let source = format!(
                    "{note}, jointly with {}; mean |log error| over {} run(s) of bench `{}` {:.3} -> {:.3}; was {}",
                    others.join(", "),
                    f.runs,
                    b.name,
                    f.log_error_before,
                    f.log_error_after,
                    fmt_num(f.before)
                );
                new_text = set_param(&new_text, &f.param, f.after, &source)?;
            }
        }
        fits.extend(bench_fits);
    }
    if fits.is_empty() {
        return Err(format!("no parameter could be fitted: {}", problems.join("; ")));
    }
    skipped.extend(problems);
    // Judge on the accuracy set, which took no part in the fit.
    let acc = validated(target, &run.accuracy, &mut skipped);
    let load = |t: &str| Calibration::from_toml_str(&file, t).map_err(|e| e.to_string());
    let (before, after) = cake::cost::accuracy::judge(&load(text)?, &load(&new_text)?, &acc, &mut skipped).map_err(|e| e.to_string())?;
    let new_text = set_meta(&new_text, fitted_on, &after);
    Calibration::from_toml_str(&file, &new_text).map_err(|e| format!("the fitted file does not load: {e}"))?;
    let params = fits.iter().map(|f| format!("{}: {} -> {}", f.param, fmt_num(f.before), fmt_num(f.after))).collect();
    Ok((
        CalibrationDraft { target: target.clone(), class: "microbenchmark suite".into(), class_ratio: None, factor: None, params, before, after, skipped, fits },
        new_text,
    ))
}

/// Group names for display: bench → runs.
pub fn runs_per_bench(run: &SavedRun) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for b in &run.suite {
        *m.entry(b.bench.clone()).or_insert(0) += 1;
    }
    m
}
