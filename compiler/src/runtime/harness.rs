//! `cake run` / `cake bench`: check and build a program, then run it in child processes over
//! shapes × distributions, write a run record per run, and report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::error::RunError;
use super::gpu::GpuInfo;
use super::isolate;
use super::job::{Job, JobResult, Verdict, JOB_FORMAT, L2_FLUSH_BYTES};
use super::record::{self, ProgramInfo, RunRecord, WorkloadInfo};
use super::rng::Dist;
use super::workload::{self, Baseline, OracleName, Shape, WorkloadSpec};
use crate::diag::Diagnostic;
use crate::nvrtc::{self, BuildError, Built};
use crate::target::{TargetInfo, TargetTable};
use crate::verify::{RuleSet, Validated};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Correctness over a sweep, a few timed repeats.
    Run,
    /// Timing at the headline shape against a baseline.
    Bench,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Run => "run",
            Mode::Bench => "bench",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub mode: Mode,
    pub program: PathBuf,
    /// Default: `<program stem>.workload.toml` beside the program.
    pub workload: Option<PathBuf>,
    /// Default: the workload's `shapes` (run) or `headline` (bench).
    pub shapes: Vec<Shape>,
    /// Default: the workload's `distributions`, else the per-input distributions.
    pub dists: Vec<Dist>,
    /// Wall-clock limit of one child (one shape × distribution).
    pub timeout: Duration,
    pub unsafe_skip_verify: bool,
    /// The verifier rules the program is checked with (`cake run` chooses them with
    /// [`crate::rule_source::ActiveRules`]).
    pub rules: Arc<RuleSet>,
    /// Evidence root: records go to `<evidence>/runs/`.
    pub evidence: PathBuf,
    pub repeats: Option<u32>,
    pub warmup: Option<u32>,
    /// Interleaved rounds of kernel and peer (`runtime::rounds`), `repeats` samples each.
    /// Default: 3 when a peer is timed, else 1.
    pub rounds: Option<u32>,
    pub baseline: Option<Baseline>,
    pub seed: Option<u64>,
    /// Compare GEMM outputs with cuBLAS in full.
    pub cublas_check: bool,
    /// Build for this architecture instead of choosing one (`sm_90a`, `sm_90`).
    pub arch: Option<String>,
    /// The binary to spawn as the child (`cake` itself).
    pub exe: PathBuf,
    /// After this many timeouts in one invocation, record the remaining runs as skipped
    /// (class `too_many_timeouts`) instead of waiting for each to hang.
    pub max_timeouts: Option<u32>,
}

/// Why nothing could run. Usage variants (`R0xx`, exit 2) name the file, shape or flag at fault;
/// `Findings` and `Build` are the program's (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// R001: the program file cannot be read.
    #[error("cannot read {path}: {message} (check the path of the `.cake` file)")]
    ReadProgram { path: String, message: String },
    /// R002: the workload spec cannot be read.
    #[error("cannot read the workload spec {path}: {message} (pass --workload FILE)")]
    ReadWorkload { path: String, message: String },
    /// R003: the workload spec does not parse or does not fit the program.
    #[error("{message}")]
    Workload { path: String, message: String },
    /// R004: a `--shape` the program cannot take (a dim missing, unknown, or not a multiple).
    #[error("--shape {shape}: {message}")]
    Shape { shape: String, message: String },
    /// R005: `--baseline cublas` for a workload with no peer GEMM.
    #[error("--baseline cublas needs a workload with a peer GEMM (matmul_abt, or kmeans_assign's distance GEMM); {workload} uses {oracle}")]
    NoCublasPeer { workload: String, oracle: String },
    /// R006: the program's target is not in the built-in table.
    #[error("unknown target `{target}` (use a target of `compiler/targets.toml`)")]
    UnknownTarget { target: String },
    /// R007: the run's scratch directory or the cubin cannot be written.
    #[error("cannot write {path}: {message} (check that the temporary directory is writable and the disk is not full)")]
    WorkDir { path: String, message: String },
    /// The program has errors (or the verifier rejected it): diagnostics over its `text` (exit 1).
    #[error("the program has {} error finding(s); nothing ran (use --unsafe-skip-verify to run a program the verifier rejects)", diagnostics.iter().filter(|d| d.is_error()).count())]
    Findings { text: String, diagnostics: Vec<Diagnostic> },
    /// The build failed; its record was written (exit 1).
    #[error("the build failed: {error}")]
    Build { error: BuildError, text: String, record: Option<PathBuf> },
}

impl HarnessError {
    /// The stable code: `R00x` for usage errors, the first finding's code, or the build's.
    pub fn code(&self) -> &str {
        match self {
            HarnessError::ReadProgram { .. } => "R001",
            HarnessError::ReadWorkload { .. } => "R002",
            HarnessError::Workload { .. } => "R003",
            HarnessError::Shape { .. } => "R004",
            HarnessError::NoCublasPeer { .. } => "R005",
            HarnessError::UnknownTarget { .. } => "R006",
            HarnessError::WorkDir { .. } => "R007",
            HarnessError::Findings { diagnostics, .. } => diagnostics.iter().find(|d| d.is_error()).map_or("E0000", |d| d.code.as_str()),
            HarnessError::Build { error, .. } => error.code(),
        }
    }

    /// Bad arguments, files, workload or shapes: the caller's, not the program's (exit 2).
    pub fn is_usage(&self) -> bool {
        !matches!(self, HarnessError::Findings { .. } | HarnessError::Build { .. })
    }

    /// The error as diagnostics: the findings or the build's (located in the program), else one
    /// unlocated diagnostic with the code.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            HarnessError::Findings { diagnostics, .. } => diagnostics.clone(),
            HarnessError::Build { error, .. } => error.to_diagnostics(),
            _ => vec![Diagnostic::error(self.code(), self.to_string(), crate::span::Span::default(), "")],
        }
    }
}

/// One finished run.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub record: RunRecord,
    /// `None` when the record could not be written (the error is in `write_error`).
    pub path: Option<PathBuf>,
    pub write_error: Option<String>,
}

/// What happened before the runs (for the caller to print).
#[derive(Clone, Debug, Default)]
pub struct Prelude {
    pub gpu: Option<GpuInfo>,
    pub gpu_problem: Option<RunError>,
    pub arch: String,
    pub notes: Vec<String>,
    /// Non-blocking findings of the verifier and the build (warnings, hints).
    pub diagnostics: Vec<Diagnostic>,
    pub source: String,
}

/// The architecture to build for: the program's own when the device is of its target,
/// the device's when the program targets an older architecture (its code runs there as
/// compiled for the device), and an `arch` error when the device is older than the target.
pub fn choose_arch(target: &TargetInfo, gpu: Option<&GpuInfo>) -> Result<(String, Option<String>), RunError> {
    let Some(g) = gpu else { return Ok((target.arch.clone(), None)) };
    let dev_sm = g.cc[0] * 10 + g.cc[1];
    if dev_sm == target.sm {
        Ok((target.arch.clone(), None))
    } else if dev_sm > target.sm && !target.arch.ends_with('a') {
        Ok((
            g.arch(),
            Some(format!("target {} runs on {} ({}) compiled as {}", target.name, g.name, g.arch(), g.arch())),
        ))
    } else {
        Err(RunError::new(
            "arch",
            format!(
                "target {} (sm_{}) cannot run on {} (compute capability {}.{})",
                target.name, target.sm, g.name, g.cc[0], g.cc[1]
            ),
        ))
    }
}

/// Check, build and run. `on_run` is called after each run with its outcome.
pub fn run(
    opts: &Options,
    on_prelude: &mut dyn FnMut(&Prelude),
    on_run: &mut dyn FnMut(&Outcome),
) -> Result<Vec<Outcome>, HarnessError> {
    let name = opts.program.display().to_string();
    let source =
        std::fs::read_to_string(&opts.program).map_err(|e| HarnessError::ReadProgram { path: name.clone(), message: e.to_string() })?;
    let checked = crate::check::check_source_with(&source, &opts.rules);
    let (Some(file), Some(module)) = (checked.file.as_ref(), checked.module.clone()) else {
        return Err(HarnessError::Findings { text: source, diagnostics: checked.diagnostics });
    };
    let blocking: Vec<Diagnostic> = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
    // `--unsafe-skip-verify` always bypasses the verifier (and says so in the records), even for
    // a program it would accept.
    let validated = match (checked.validated.clone(), opts.unsafe_skip_verify) {
        (_, true) => Validated::assume_verified_unsafe(module.clone()),
        (Some(v), false) => v,
        (None, false) => return Err(HarnessError::Findings { text: source, diagnostics: checked.diagnostics }),
    };
    let mut prelude = Prelude { source: source.clone(), ..Prelude::default() };
    prelude.diagnostics =
        checked.diagnostics.iter().filter(|d| !d.is_error() || opts.unsafe_skip_verify).cloned().collect();
    if opts.unsafe_skip_verify {
        prelude.notes.push(format!(
            "--unsafe-skip-verify: the verifier was bypassed{}; records say `unverified: true`",
            if blocking.is_empty() { String::new() } else { format!(" ({} error finding(s) ignored)", blocking.len()) }
        ));
    }
    let canonical = crate::syntax::print(file);
    let program = ProgramInfo {
        name: module.name.clone(),
        path: name.clone(),
        sha256: record::sha256_hex(canonical.as_bytes()),
        target: module.target.clone(),
        unverified: validated.unverified,
        findings: checked.diagnostics.iter().map(|d| d.code.to_string()).collect(),
    };

    // ---- workload, shapes, distributions
    let wpath = opts.workload.clone().unwrap_or_else(|| workload::default_path(&opts.program));
    let wname = wpath.display().to_string();
    let wtext = std::fs::read_to_string(&wpath)
        .map_err(|e| HarnessError::ReadWorkload { path: wname.clone(), message: e.to_string() })?;
    let spec = WorkloadSpec::from_toml_str(&wname, &wtext)
        .map_err(|e| HarnessError::Workload { path: wname.clone(), message: e.to_string() })?;
    spec.validate(&module).map_err(|e| HarnessError::Workload { path: wname.clone(), message: format!("{wname}: {e}") })?;
    let winfo = WorkloadInfo {
        path: wpath.display().to_string(),
        sha256: record::sha256_hex(wtext.as_bytes()),
        oracle: spec.oracle.name().into(),
    };
    let shapes: Vec<Shape> = if !opts.shapes.is_empty() {
        for s in &opts.shapes {
            workload::check_shape(&module, s)
                .map_err(|e| HarnessError::Shape { shape: workload::shape_label(s), message: e.to_string() })?;
        }
        opts.shapes.clone()
    } else if opts.mode == Mode::Bench {
        vec![spec.headline.clone()]
    } else {
        spec.shapes.clone()
    };
    let dists: Vec<Option<Dist>> = if !opts.dists.is_empty() {
        opts.dists.iter().copied().map(Some).collect()
    } else if !spec.distributions.is_empty() && opts.mode == Mode::Run {
        spec.distributions.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    let baseline = match (opts.baseline, opts.mode) {
        (Some(b), _) => b,
        (None, Mode::Bench) => spec
            .baseline
            .as_deref()
            .and_then(Baseline::parse)
            .unwrap_or(if spec.oracle == OracleName::MatmulAbt { Baseline::Cublas } else { Baseline::None }),
        (None, Mode::Run) => Baseline::None,
    };
    if baseline == Baseline::Cublas && !spec.oracle.has_cublas_peer() {
        return Err(HarnessError::NoCublasPeer { workload: wname, oracle: spec.oracle.name().to_string() });
    }
    let (repeats, warmup) = match opts.mode {
        Mode::Run => (opts.repeats.unwrap_or(5), opts.warmup.unwrap_or(1)),
        Mode::Bench => (opts.repeats.unwrap_or(20), opts.warmup.unwrap_or(3)),
    };
    let seed = opts.seed.or(spec.seed).unwrap_or(1);

    // ---- GPU and architecture
    let target = TargetTable::builtin()
        .get(&module.target)
        .ok_or_else(|| HarnessError::UnknownTarget { target: module.target.clone() })?;
    match isolate::probe_gpu(&opts.exe, Duration::from_secs(60)) {
        Ok(g) => prelude.gpu = Some(g),
        Err(e) => prelude.gpu_problem = Some(e),
    }
    let mut run_block: Option<RunError> = prelude.gpu_problem.clone();
    let arch = match &opts.arch {
        Some(a) => a.clone(),
        None => match choose_arch(target, prelude.gpu.as_ref()) {
            Ok((a, note)) => {
                prelude.notes.extend(note);
                a
            }
            Err(e) => {
                run_block = Some(e);
                target.arch.clone()
            }
        },
    };
    prelude.arch = arch.clone();

    // ---- build
    let mut build_target = target.clone();
    build_target.arch = arch.clone();
    let file_name = opts.program.file_name().map_or_else(|| name.clone(), |f| f.to_string_lossy().into_owned());
    let built: Built = match nvrtc::build_with(
        &validated,
        &build_target,
        &crate::lower::LowerOptions::with_source(&file_name, &source),
    ) {
        Ok(b) => b,
        Err(error) => {
            let mut r =
                JobResult::from_error(RunError::new(format!("build_{}", error.code()), error.to_string()), "build");
            r.gpu = prelude.gpu.clone();
            let rec = RunRecord::from_result(
                opts.mode.name(),
                program,
                Some(arch),
                Some(winfo),
                Shape::new(),
                "-".into(),
                seed,
                None,
                None,
                r,
                None,
            );
            let path = record::write_record(&opts.evidence, &rec).ok().map(|(p, _)| p);
            on_prelude(&prelude);
            return Err(HarnessError::Build { error, text: source, record: path });
        }
    };
    prelude.diagnostics.extend(built.diagnostics.iter().cloned());
    on_prelude(&prelude);

    let work = isolate::work_dir()
        .map_err(|e| HarnessError::WorkDir { path: "a work directory".into(), message: e.to_string() })?;
    let cubin = work.join("kernel.cubin");
    std::fs::write(&cubin, &built.cubin)
        .map_err(|e| HarnessError::WorkDir { path: cubin.display().to_string(), message: e.to_string() })?;
    let _ = std::fs::write(work.join("kernel.cu"), &built.cuda);

    let mut outcomes = Vec::new();
    let mut index = 0usize;
    let mut timeouts = 0u32;
    for shape in &shapes {
        for dist in &dists {
            index += 1;
            let run_dir = work.join(format!("run{index}"));
            let _ = std::fs::create_dir_all(&run_dir);
            let block = run_block.clone().or_else(|| {
                opts.max_timeouts.filter(|&n| timeouts >= n).map(|n| {
                    RunError::new(
                        "too_many_timeouts",
                        format!("not run: {timeouts} run(s) of this invocation timed out (--max-timeouts {n})"),
                    )
                })
            });
            let result = match &block {
                Some(e) => {
                    let mut r = JobResult::from_error(e.clone(), "probe");
                    if e.class == "arch" || e.class == "too_many_timeouts" {
                        r.verdict = Verdict::Skipped;
                    }
                    r
                }
                None => {
                    let job = Job {
                        format: JOB_FORMAT,
                        cubin: cubin.clone(),
                        launch: built.launch.clone(),
                        shape: shape.clone(),
                        workload: spec.clone(),
                        dist: *dist,
                        seed,
                        warmup,
                        repeats,
                        rounds: if baseline == Baseline::Cublas { opts.rounds.unwrap_or(crate::runtime::rounds::DEFAULT_ROUNDS).max(1) } else { 1 },
                        baseline,
                        cublas_check: opts.cublas_check,
                        kernel_timeout_s: (opts.timeout.as_secs_f64() * 0.4).max(1.0),
                        l2_flush_bytes: L2_FLUSH_BYTES,
                        result: run_dir.join("result.json"),
                        fake: None,
                    };
                    isolate::run_isolated(&opts.exe, &job, opts.timeout)
                }
            };
            let mut rec = RunRecord::from_result(
                opts.mode.name(),
                program.clone(),
                Some(arch.clone()),
                Some(winfo.clone()),
                shape.clone(),
                dist.map_or_else(|| "per-input".to_string(), |d| d.name().to_string()),
                seed,
                spec.flops_at(shape),
                Some(built.report.clone()),
                result,
                prelude.gpu.as_ref(),
            );
            rec.notes.splice(0..0, prelude.notes.iter().cloned());
            rec.prediction = predict(&validated, shape);
            if rec.verdict == Verdict::Timeout {
                timeouts += 1;
            }
            let (path, write_error) = match record::write_record(&opts.evidence, &rec) {
                Ok((p, _)) => (Some(p), None),
                Err(e) => (None, Some(e.to_string())),
            };
            let o = Outcome { record: rec, path, write_error };
            on_run(&o);
            outcomes.push(o);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(outcomes)
}

/// The exit status of a finished harness run: 0 all passed, 1 any mismatch / error / timeout,
/// 3 nothing ran (every run skipped: no GPU).
pub fn exit_status(outcomes: &[Outcome]) -> u8 {
    if outcomes.iter().any(|o| {
        matches!(o.record.verdict, Verdict::Mismatch | Verdict::Error | Verdict::Timeout) || o.write_error.is_some()
    }) {
        1
    } else if !outcomes.is_empty() && outcomes.iter().all(|o| o.record.verdict == Verdict::Skipped) {
        3
    } else {
        0
    }
}

/// A table row for people.
pub fn table_header(mode: Mode) -> String {
    match mode {
        Mode::Run => format!(
            "{:<28} {:<9} {:<9} {:>10} {:>10} {:>9}  {}",
            "shape", "dist", "verdict", "median ms", "TFLOP/s", "rel err", "detail"
        ),
        Mode::Bench => format!(
            "{:<28} {:<9} {:<9} {:>10} {:>9} {:>9} {:>10} {:>9} {:>7}  {}",
            "shape", "dist", "verdict", "median ms", "min ms", "p90 ms", "TFLOP/s", "base ms", "ratio", "detail"
        ),
    }
}

pub fn table_row(mode: Mode, o: &Outcome) -> String {
    let r = &o.record;
    let f = |v: Option<f64>, p: usize| v.map_or_else(|| "-".to_string(), |x| format!("{x:.p$}"));
    let t = r.times_ms.as_ref();
    let err = r
        .checks
        .iter()
        .map(|c| c.rel_l2_err)
        .filter(|e| e.is_finite())
        .fold(None, |a: Option<f64>, e| Some(a.map_or(e, |a| a.max(e))));
    let detail = r.problem().unwrap_or_else(|| {
        let ties: u64 = r.checks.iter().map(|c| c.ties_accepted).sum();
        if ties > 0 {
            format!("{ties} tie(s) accepted")
        } else {
            String::new()
        }
    });
    let detail: String = detail.chars().take(140).collect();
    let shape = workload::shape_label(&r.shape);
    match mode {
        Mode::Run => format!(
            "{:<28} {:<9} {:<9} {:>10} {:>10} {:>9}  {}",
            shape,
            r.dist,
            r.verdict.name(),
            f(t.map(|t| t.median_ms), 4),
            f(r.tflops, 1),
            err.map_or_else(|| "-".into(), |e| format!("{e:.2e}")),
            detail
        ),
        Mode::Bench => format!(
            "{:<28} {:<9} {:<9} {:>10} {:>9} {:>9} {:>10} {:>9} {:>7}  {}",
            shape,
            r.dist,
            r.verdict.name(),
            f(t.map(|t| t.median_ms), 4),
            f(t.map(|t| t.min_ms), 4),
            f(t.map(|t| t.p90_ms), 4),
            f(r.tflops, 1),
            f(r.baseline.as_ref().map(|b| b.times_ms.median_ms), 4),
            f(r.baseline.as_ref().map(|b| b.speed_ratio), 3),
            detail
        ),
    }
}

/// Where the harness's child binary is: this executable.
pub fn current_exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("cake"))
}

/// Evidence root from `--evidence` or the default.
pub fn evidence_root(arg: Option<&Path>) -> PathBuf {
    arg.map_or_else(|| PathBuf::from(record::DEFAULT_EVIDENCE_DIR), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(cc: [u32; 2]) -> GpuInfo {
        GpuInfo {
            name: "NVIDIA H200".into(),
            ordinal: 0,
            cc,
            sm_count: 132,
            l2_bytes: 60 << 20,
            smem_per_block_optin: 232448,
            total_mem_bytes: 140 << 30,
            driver_cuda: "13.0".into(),
            driver_release: None,
        }
    }

    #[test]
    fn the_build_architecture_follows_the_device() {
        let t = TargetTable::builtin();
        let h200 = gpu([9, 0]);
        assert_eq!(choose_arch(t.get("sm_90a").unwrap(), Some(&h200)).unwrap(), ("sm_90a".to_string(), None));
        let (arch, note) = choose_arch(t.get("sm_80").unwrap(), Some(&h200)).unwrap();
        assert_eq!(arch, "sm_90");
        assert!(note.unwrap().contains("compiled as sm_90"));
        assert_eq!(choose_arch(t.get("sm_100a").unwrap(), Some(&h200)).unwrap_err().class, "arch");
        assert_eq!(choose_arch(t.get("sm_80").unwrap(), None).unwrap().0, "sm_80");
    }
}

/// The cost model's prediction for a run, when the program's target is calibrated (a target
/// without calibration predicts nothing, and the record says nothing).
fn predict(validated: &Validated, shape: &Shape) -> Option<record::Prediction> {
    let calibration = crate::cost::builtin_calibration(&validated.module().target).ok()?;
    let estimate = crate::cost::estimate(validated, calibration, shape).ok()?;
    Some(record::Prediction {
        predicted_ms: estimate.predicted_ms,
        bottleneck: estimate.bottleneck.as_str().to_string(),
        calibration: calibration.meta.fitted_on.clone(),
    })
}
