//! The three tiers: what each runs and how it compares observations with the manifest.
//!
//! - **static**: parse, type check and verify (what `cake check` does); the verdict and the exact
//!   `(code, line, column)` of every error finding must match `[expect]`, and so must the
//!   warnings, hints and coverage limits where the manifest lists them.
//! - **compile**: lower the validated program to CUDA and build a cubin with NVRTC; the ptxas
//!   facts must stay within `[compile]`. Skipped (with the reason) where the toolchain is absent.
//!   A construct the lowering does not support is a **failure** — a case whose kernels cannot be
//!   lowered yet must not list the compile tier.
//! - **gpu**: run the cubin on the workload and compare with the oracle. Skipped ("no GPU") on
//!   machines without one.
//!
//! The compile and GPU tiers go through [`CompileBackend`] and [`GpuBackend`], so the gate runs
//! the same way with the real toolchain, without it, and in tests.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::check::CheckOutput;
use crate::diag::{Diagnostic, Severity};
use crate::ir::Module;
use crate::render::clamp_span;
use crate::span::line_col;
use crate::target::{TargetInfo, TargetTable};
use crate::verify::{Validated, VerifyOutput};

use super::results::Observed;
use super::{Case, CompileBounds, FindingSpec, Verdict, Workload};

/// What one attempt of one tier produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Pass { observed: Observed, note: String },
    Fail { reason: String, observed: Observed },
    Error(String),
    Skipped(String),
    Timeout(String),
    OutOfMemory(String),
}

impl Outcome {
    pub fn observed(&self) -> Option<&Observed> {
        match self {
            Outcome::Pass { observed, .. } | Outcome::Fail { observed, .. } => Some(observed),
            _ => None,
        }
    }
}

/// A replacement verifier (for example, rules loaded from a directory), used instead of the
/// built-in one.
pub type VerifierFn = dyn Fn(Module, &TargetInfo) -> VerifyOutput + Send + Sync;

/// The front end the static tier runs: the built-in catalog, targets and verifier, or
/// replacements (the way a proposed compiler change — a catalog entry, a verifier rule — is
/// gated before it is merged).
#[derive(Clone, Default)]
pub struct Frontend {
    pub catalog: Option<Arc<Catalog>>,
    pub targets: Option<Arc<TargetTable>>,
    pub verifier: Option<Arc<VerifierFn>>,
    /// Where the replacements came from, for the report (`--catalog DIR`, ...).
    pub description: Vec<String>,
}

impl Frontend {
    pub fn is_builtin(&self) -> bool {
        self.catalog.is_none() && self.targets.is_none() && self.verifier.is_none()
    }

    /// Parse, type check and verify `source` — exactly `cake::check::check_source` when nothing
    /// is replaced.
    pub fn check(&self, source: &str) -> CheckOutput {
        if self.is_builtin() {
            return crate::check::check_source(source);
        }
        let file = match crate::syntax::parse(source) {
            Ok(file) => file,
            Err(diagnostics) => return CheckOutput { file: None, module: None, validated: None, diagnostics },
        };
        let targets: &TargetTable = self.targets.as_deref().unwrap_or_else(|| TargetTable::builtin());
        let catalog: &Catalog = self.catalog.as_deref().unwrap_or_else(|| Catalog::builtin());
        let (module, mut diagnostics) = crate::check::check_file(&file, catalog, targets);
        let mut validated = None;
        if let Some(m) = &module {
            if let Some(target) = targets.get(&m.target) {
                let out = match &self.verifier {
                    Some(v) => v(m.clone(), target),
                    None => crate::verify::verify(m.clone(), target),
                };
                diagnostics.extend(out.findings);
                validated = out.validated;
            }
        }
        CheckOutput { file: Some(file), module, validated, diagnostics }
    }
}

/// `(code, line, column)` of the findings of one severity, sorted; follow-on findings left out.
pub fn findings_at(source: &str, diags: &[Diagnostic], severity: Severity) -> Vec<FindingSpec> {
    let mut out: Vec<FindingSpec> = diags
        .iter()
        // Follow-on findings are what `cake check` hides: a case expects the causes.
        .filter(|d| d.severity == severity && !d.is_follow_on())
        .map(|d| {
            let (line, column) = line_col(source, clamp_span(source, d.primary.span).start);
            FindingSpec { code: d.code.clone(), line, column }
        })
        .collect();
    out.sort();
    out
}

fn list(f: &[FindingSpec]) -> String {
    if f.is_empty() {
        "none".to_string()
    } else {
        f.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }
}

/// The difference between two multisets of findings, for the reason line.
fn finding_diff(want: &[FindingSpec], got: &[FindingSpec]) -> String {
    let mut missing: Vec<FindingSpec> = want.to_vec();
    let mut extra: Vec<FindingSpec> = Vec::new();
    for g in got {
        if let Some(i) = missing.iter().position(|w| w == g) {
            missing.remove(i);
        } else {
            extra.push(g.clone());
        }
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing {}", list(&missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("unexpected {}", list(&extra)));
    }
    parts.join("; ")
}

/// The static tier on one case. Also returns the validated program for the later tiers.
pub fn run_static(case: &Case, frontend: &Frontend) -> (Outcome, Option<Validated>) {
    let out = frontend.check(&case.source);
    let errors = findings_at(&case.source, &out.diagnostics, Severity::Error);
    let warnings = findings_at(&case.source, &out.diagnostics, Severity::Warning);
    let hints = findings_at(&case.source, &out.diagnostics, Severity::Hint);
    let coverage = findings_at(&case.source, &out.diagnostics, Severity::CoverageLimit);
    let verdict = if errors.is_empty() && out.validated.is_some() { Verdict::Accept } else { Verdict::Reject };
    let observed = Observed {
        verdict: Some(verdict),
        findings: Some(errors.clone()),
        warnings: Some(warnings.clone()),
        hints: Some(hints.clone()),
        coverage_limits: Some(coverage.clone()),
        ..Observed::default()
    };

    let mut problems = Vec::new();
    // The manifest names the target the program must declare.
    if let Some(f) = &out.file {
        if f.target.name != case.manifest.target {
            problems.push(format!("the manifest says target `{}` but the program declares `{}`", case.manifest.target, f.target.name));
        }
    }
    let expect = &case.manifest.expect;
    if verdict != expect.verdict {
        let first = out.diagnostics.iter().find(|d| d.is_error()).map(|d| {
            let (l, c) = line_col(&case.source, clamp_span(&case.source, d.primary.span).start);
            format!(" — first error {}@{l}:{c}: {}", d.code, d.message)
        });
        problems.push(format!("expected verdict {}, got {}{}", expect.verdict.as_str(), verdict.as_str(), first.unwrap_or_default()));
    }
    let mut want = expect.findings.clone();
    want.sort();
    if want != errors {
        problems.push(format!("error findings differ: {}", finding_diff(&want, &errors)));
    }
    for (what, listed, got) in [
        ("warnings", &expect.warnings, &warnings),
        ("hints", &expect.hints, &hints),
        ("coverage limits", &expect.coverage_limits, &coverage),
    ] {
        if let Some(w) = listed {
            let mut w = w.clone();
            w.sort();
            if &w != got {
                problems.push(format!("{what} differ: {}", finding_diff(&w, got)));
            }
        }
    }
    let validated = out.validated;
    let outcome = if problems.is_empty() {
        Outcome::Pass { observed, note: String::new() }
    } else {
        Outcome::Fail { reason: problems.join("; "), observed }
    };
    (outcome, validated)
}

// ---------------------------------------------------------------------------------------------
// compile tier

/// The facts ptxas reports for a kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasFacts {
    pub registers: u32,
    /// Spill stores + spill loads, bytes.
    pub spill_bytes: u64,
    /// Static shared memory plus the dynamic shared memory the launch asks for, bytes.
    pub smem_bytes: u64,
}

/// Why a compile did not produce facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// The lowering does not support a construct of the program (a failure of the case).
    Unsupported(String),
    /// Lowering or NVRTC/ptxas failed (a failure of the case).
    Failed(String),
    /// The compile ran past its time limit.
    Timeout(String),
}

/// Whether a tier's backend can run here: what it uses (recorded in the results' environment),
/// or why the tier is skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    Available { using: String },
    Unavailable { why: String },
}

impl Availability {
    /// The results' `environment` entry: what is used, or `skipped: why`.
    pub fn environment(&self) -> String {
        match self {
            Availability::Available { using } => using.clone(),
            Availability::Unavailable { why } => format!("skipped: {why}"),
        }
    }
}

/// Lowers and builds a validated program. `availability` says whether it can run here at all.
pub trait CompileBackend: Send + Sync {
    fn availability(&self) -> Availability;
    fn compile(&self, validated: &Validated, case: &Case) -> Result<PtxasFacts, CompileError>;
}

/// Compare ptxas facts with the manifest's bounds.
pub fn judge_compile(bounds: Option<&CompileBounds>, facts: &PtxasFacts) -> Outcome {
    let observed =
        Observed { registers: Some(facts.registers), spills: Some(facts.spill_bytes), smem: Some(facts.smem_bytes), ..Observed::default() };
    let mut problems = Vec::new();
    let default = CompileBounds::default();
    let b = bounds.unwrap_or(&default);
    if let Some(max) = b.max_registers {
        if facts.registers > max {
            problems.push(format!("{} registers > max_registers {max}", facts.registers));
        }
    }
    // Zero spills unless the manifest says otherwise.
    let spills = b.spills.unwrap_or(0);
    if facts.spill_bytes != spills {
        problems.push(format!("{} spill bytes, expected {spills}", facts.spill_bytes));
    }
    if let Some(max) = b.max_smem {
        if facts.smem_bytes > max {
            problems.push(format!("{} bytes of shared memory > max_smem {max}", facts.smem_bytes));
        }
    }
    if problems.is_empty() {
        let note =
            if bounds.is_none_or(CompileBounds::is_empty) { "no [compile] bounds beyond zero spills".to_string() } else { String::new() };
        Outcome::Pass { observed, note }
    } else {
        Outcome::Fail { reason: problems.join("; "), observed }
    }
}

pub fn run_compile(case: &Case, validated: Option<&Validated>, backend: &dyn CompileBackend) -> Outcome {
    if let Availability::Unavailable { why } = backend.availability() {
        return Outcome::Skipped(why);
    }
    let Some(v) = validated else {
        return Outcome::Fail {
            reason: "the program did not validate, so there is nothing to compile (see the static tier)".into(),
            observed: Observed::default(),
        };
    };
    match backend.compile(v, case) {
        Ok(facts) => judge_compile(case.manifest.compile.as_ref(), &facts),
        Err(CompileError::Unsupported(m)) => {
            Outcome::Fail { reason: format!("lowering does not support this program: {m}"), observed: Observed::default() }
        }
        Err(CompileError::Failed(m)) => Outcome::Fail { reason: m, observed: Observed::default() },
        Err(CompileError::Timeout(m)) => Outcome::Timeout(m),
    }
}

/// The compile backend of this build: `cake::nvrtc::build_with` (lowering to CUDA, then NVRTC
/// with the ptxas report) for the program's own target. Skipped where NVRTC cannot be loaded (no
/// CUDA toolchain: run `scripts/setup-cuda-toolchain.sh` and source `.toolchain/cuda/env.sh`).
pub struct BuiltinCompile;

impl CompileBackend for BuiltinCompile {
    fn availability(&self) -> Availability {
        match crate::nvrtc::ensure_nvrtc() {
            // The library's file name only (`libnvrtc.so.13`): results are committed.
            Ok(()) => Availability::Available {
                using: format!(
                    "NVRTC{}",
                    std::env::var(crate::nvrtc::NVRTC_LIB_ENV)
                        .ok()
                        .and_then(|p| std::path::Path::new(&p).file_name().map(|n| format!(" ({})", n.to_string_lossy())))
                        .unwrap_or_default()
                ),
            },
            Err(e) => Availability::Unavailable { why: format!("no CUDA toolchain ({e})") },
        }
    }

    fn compile(&self, validated: &Validated, case: &Case) -> Result<PtxasFacts, CompileError> {
        let module = validated.module();
        let Some(target) = TargetTable::builtin().get(&module.target) else {
            return Err(CompileError::Failed(format!("unknown target `{}`", module.target)));
        };
        let name = format!("{}.cake", case.id.replace('/', "__"));
        let mut opts = crate::lower::LowerOptions::with_source(&name, &case.source);
        opts.cuda_name = format!("{}.cu", case.id.replace('/', "__"));
        match crate::nvrtc::build_with(validated, target, &opts) {
            Ok(built) => Ok(PtxasFacts {
                registers: built.report.registers.unwrap_or(0),
                spill_bytes: built.report.spills(),
                smem_bytes: built.report.smem_bytes + u64::from(built.launch.dynamic_smem_bytes),
            }),
            Err(crate::nvrtc::BuildError::Lower(e)) if e.code == "L001" => Err(CompileError::Unsupported(e.to_string())),
            Err(crate::nvrtc::BuildError::Lower(e)) => Err(CompileError::Failed(format!("lowering failed: {e}"))),
            Err(e) => Err(CompileError::Failed(first_line(&e.to_string()))),
        }
    }
}

/// The first few lines of a long message (an NVRTC log), for the reason column.
fn first_line(s: &str) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).take(4).collect();
    lines.join(" / ")
}

// ---------------------------------------------------------------------------------------------
// gpu tier

/// What one GPU run showed.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuOutcome {
    /// Within tolerance of the oracle.
    pub correct: bool,
    pub max_error: f64,
    pub time_us: Option<f64>,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuError {
    /// Nothing ran, for a reason that is not the compiler's (the device cannot run the target).
    Skipped(String),
    Unsupported(String),
    Failed(String),
    Timeout(String),
    OutOfMemory(String),
}

pub trait GpuBackend: Send + Sync {
    fn availability(&self) -> Availability;
    fn run(&self, validated: &Validated, case: &Case, workload: &Workload) -> Result<GpuOutcome, GpuError>;
}

pub fn run_gpu(case: &Case, validated: Option<&Validated>, backend: &dyn GpuBackend) -> Outcome {
    if let Availability::Unavailable { why } = backend.availability() {
        return Outcome::Skipped(why);
    }
    let Some(w) = &case.manifest.workload else { return Outcome::Error("the gpu tier needs a [workload]".into()) };
    let Some(v) = validated else {
        return Outcome::Fail { reason: "the program did not validate, so there is nothing to run".into(), observed: Observed::default() };
    };
    match backend.run(v, case, w) {
        Ok(o) => {
            let observed = Observed { max_error: Some(o.max_error), time_us: o.time_us, ..Observed::default() };
            if o.correct {
                Outcome::Pass { observed, note: o.detail }
            } else {
                Outcome::Fail {
                    reason: format!(
                        "outputs differ from the oracle `{}` (max error {:e}): {}",
                        w.get("oracle").and_then(|v| v.as_str()).unwrap_or("?"),
                        o.max_error,
                        o.detail
                    ),
                    observed,
                }
            }
        }
        Err(GpuError::Skipped(m)) => Outcome::Skipped(m),
        Err(GpuError::Unsupported(m)) => Outcome::Fail { reason: format!("not supported: {m}"), observed: Observed::default() },
        Err(GpuError::Failed(m)) => Outcome::Fail { reason: m, observed: Observed::default() },
        Err(GpuError::Timeout(m)) => Outcome::Timeout(m),
        Err(GpuError::OutOfMemory(m)) => Outcome::OutOfMemory(m),
    }
}

/// Whether this machine has an NVIDIA GPU the driver exposes.
pub fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidia0").exists()
        || std::path::Path::new("/dev/nvidiactl").exists()
            && std::path::Path::new("/proc/driver/nvidia/gpus").read_dir().is_ok_and(|mut d| d.next().is_some())
}

/// The GPU backend of this build: `cake::runtime::harness` (the engine of `cake run`) runs the
/// case's program on its workload in child processes of the `cake` binary `exe`, one per shape,
/// each with a time limit, and checks the outputs with the workload's oracle. Skipped with
/// "no GPU" on machines without one.
pub struct BuiltinGpu {
    /// The `cake` binary the runtime spawns as the child (it runs `cake`'s hidden job command).
    pub exe: std::path::PathBuf,
    /// Evidence root for the run records (`<evidence>/runs/`).
    pub evidence: std::path::PathBuf,
    /// Wall-clock limit of one child.
    pub child_timeout: std::time::Duration,
}

impl Default for BuiltinGpu {
    fn default() -> BuiltinGpu {
        BuiltinGpu {
            exe: crate::runtime::harness::current_exe(),
            evidence: std::path::PathBuf::from("target/corpus/evidence"),
            child_timeout: std::time::Duration::from_secs(120),
        }
    }
}

impl GpuBackend for BuiltinGpu {
    fn availability(&self) -> Availability {
        if !gpu_present() {
            return Availability::Unavailable { why: "no GPU".to_string() };
        }
        // The executable's name only: results are committed, and hold no machine's paths.
        let exe = self.exe.file_name().map_or_else(|| "this executable".to_string(), |n| n.to_string_lossy().into_owned());
        Availability::Available { using: format!("GPU through cake::runtime (children of `{exe}`)") }
    }

    fn run(&self, _validated: &Validated, case: &Case, workload: &Workload) -> Result<GpuOutcome, GpuError> {
        use crate::runtime::harness::{self, HarnessError, Mode, Options};
        use crate::runtime::job::Verdict as V;
        let dir = std::env::temp_dir().join(format!("cake-corpus-{}-{}", std::process::id(), case.id.replace('/', "__")));
        std::fs::create_dir_all(&dir).map_err(|e| GpuError::Failed(format!("cannot create {}: {e}", dir.display())))?;
        let (program, wpath) = (dir.join(format!("{}.cake", case.id.replace('/', "__"))), dir.join("workload.toml"));
        let wtext = toml::to_string(workload).map_err(|e| GpuError::Failed(e.to_string()))?;
        std::fs::write(&program, &case.source).and_then(|_| std::fs::write(&wpath, wtext)).map_err(|e| GpuError::Failed(e.to_string()))?;
        let opts = Options {
            mode: Mode::Run,
            program,
            workload: Some(wpath),
            shapes: Vec::new(),
            dists: Vec::new(),
            timeout: self.child_timeout,
            unsafe_skip_verify: false,
            // The tier's verifier already accepted the program; the harness re-checks with the
            // embedded rules, as before `cake run` read a checkout's rules.
            rules: Arc::new(crate::verify::RuleSet::builtin().clone()),
            evidence: self.evidence.clone(),
            repeats: Some(3),
            warmup: Some(1),
            baseline: None,
            seed: None,
            cublas_check: false,
            arch: None,
            exe: self.exe.clone(),
            // One hung shape is enough to call the case a timeout.
            max_timeouts: Some(1),
            rounds: None,
        };
        let result = harness::run(&opts, &mut |_| {}, &mut |_| {});
        let _ = std::fs::remove_dir_all(&dir);
        let outcomes = match result {
            Ok(o) => o,
            Err(HarnessError::Findings { diagnostics, .. }) => {
                let first = diagnostics.iter().find(|d| d.is_error()).map_or_else(String::new, |d| format!("{}: {}", d.code, d.message));
                return Err(GpuError::Failed(format!("the runtime rejected the program: {first}")));
            }
            Err(HarnessError::Build { error: crate::nvrtc::BuildError::Lower(e), .. }) if e.code == "L001" => {
                return Err(GpuError::Unsupported(e.to_string()))
            }
            Err(HarnessError::Build { error, .. }) => return Err(GpuError::Failed(first_line(&error.to_string()))),
            Err(e) => return Err(GpuError::Failed(format!("cannot run: {e}"))),
        };
        if outcomes.is_empty() {
            return Err(GpuError::Failed("the workload has no shapes to run".into()));
        }
        let label =
            |o: &harness::Outcome| format!("{:?} {}", o.record.shape, o.record.error.as_ref().map_or(String::new(), |e| format!("{e:?}")));
        if outcomes.iter().all(|o| o.record.verdict == V::Skipped) {
            return Err(GpuError::Skipped(format!("the runtime skipped every run: {}", label(&outcomes[0]))));
        }
        if let Some(o) = outcomes.iter().find(|o| o.record.verdict == V::Timeout) {
            return Err(GpuError::Timeout(label(o)));
        }
        if let Some(o) = outcomes.iter().find(|o| o.record.verdict == V::Error) {
            let text = label(o);
            return Err(if text.contains("OUT_OF_MEMORY") || text.contains("out of memory") {
                GpuError::OutOfMemory(text)
            } else {
                GpuError::Failed(format!("run error: {text}"))
            });
        }
        let max_error = outcomes.iter().flat_map(|o| o.record.checks.iter().map(|c| c.max_abs_err)).fold(0.0_f64, f64::max);
        let bad: Vec<String> = outcomes.iter().filter(|o| o.record.verdict == V::Mismatch).map(label).collect();
        let time_us = outcomes.last().and_then(|o| o.record.times_ms.as_ref()).map(|t| t.median_ms * 1e3);
        Ok(GpuOutcome {
            correct: bad.is_empty(),
            max_error,
            time_us,
            detail: if bad.is_empty() {
                format!("{} run(s) match the oracle", outcomes.len())
            } else {
                format!("mismatch at {}", bad.join("; "))
            },
        })
    }
}
