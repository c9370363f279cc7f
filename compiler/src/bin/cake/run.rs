//! The `cake run`, `cake bench`, `cake lower` and `cake build` commands: flags to library calls
//! (`cake::runtime::harness`, `cake::lower`, `cake::nvrtc`), their reports printed here.
//!
//! Exit status of `run` / `bench`: 0 every run passed; 1 a run failed (mismatch, error, timeout),
//! the program has errors, or the verifier rejected it; 2 usage or I/O error (bad arguments,
//! workload or shape); 3 nothing ran (every run skipped: no GPU on this machine).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use cake::runtime::harness::{self, HarnessError, Mode, Options, Outcome, Prelude};
use cake::runtime::rng::Dist;
use cake::runtime::workload::{self, Baseline};
use cake::rule_source::ActiveRules;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DistArg {
    Normal,
    Uniform,
    Outliers,
    Ties,
}

impl From<DistArg> for Dist {
    fn from(d: DistArg) -> Dist {
        match d {
            DistArg::Normal => Dist::Normal,
            DistArg::Uniform => Dist::Uniform,
            DistArg::Outliers => Dist::Outliers,
            DistArg::Ties => Dist::Ties,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    Cublas,
    None,
}

/// Arguments both commands share.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// The `.cake` program.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// A shape: a value for every dim, `M=8192,N=8192,K=8192` (repeatable). Default: the
    /// workload's `shapes` (run) or `headline` (bench).
    #[arg(long = "shape", value_name = "DIMS")]
    pub shapes: Vec<String>,
    /// Draw every input from this distribution (repeatable: one run per distribution).
    /// Default: the workload's `distributions`, else each input's own.
    #[arg(long = "dist", value_enum, value_name = "DIST")]
    pub dists: Vec<DistArg>,
    /// Wall-clock limit in seconds for one run (one shape × distribution, in its own process).
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    pub timeout: f64,
    /// Run even if the verifier rejects the program (for deliberately broken programs); the
    /// records say `unverified: true`.
    #[arg(long)]
    pub unsafe_skip_verify: bool,
    /// Verify with the rules under DIR (`<category>/*.toml`) instead of those of the checkout
    /// around the current directory (or, outside a checkout, the rules built into `cake`).
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// The workload spec. Default: `<FILE stem>.workload.toml` beside FILE.
    #[arg(long, value_name = "TOML")]
    pub workload: Option<PathBuf>,
    /// Evidence root; records go to `DIR/runs/<sha256>.json`. Default: `.cake/evidence`.
    #[arg(long, value_name = "DIR")]
    pub evidence: Option<PathBuf>,
    /// Timed repeats (each after an L2 flush). Default: 5 (run), 20 (bench).
    #[arg(long, value_name = "N")]
    pub repeats: Option<u32>,
    /// Interleaved rounds of the kernel and its peer (kernel, peer, kernel, …), `--repeats`
    /// samples each; the speed ratio is the median of the peer's round medians over the kernel's.
    /// Default: 3 when a peer is timed.
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// Untimed warm-up launches. Default: 1 (run), 3 (bench).
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,
    /// Seed of the input generator. Default: the workload's `seed`, else 1.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Build for this architecture (`sm_90a`, `sm_90`) instead of choosing from the device.
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Do not compare GEMM outputs with cuBLAS in full (the sampled fp64 oracle still runs).
    #[arg(long)]
    pub no_cublas_check: bool,
    /// After N timeouts, skip the remaining runs of this invocation (recorded as skipped, class
    /// `too_many_timeouts`): a schedule that hangs at every shape costs N timeouts, not all.
    #[arg(long, value_name = "N")]
    pub max_timeouts: Option<u32>,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The peer timed in the same run. Default: the workload's `baseline` (cublas for GEMM).
    #[arg(long, value_enum)]
    pub baseline: Option<BaselineArg>,
}

pub fn run(args: RunArgs, color: bool) -> u8 {
    drive(Mode::Run, args.common, None, color)
}

pub fn bench(args: BenchArgs, color: bool) -> u8 {
    let b = args.baseline.map(|b| match b {
        BaselineArg::Cublas => Baseline::Cublas,
        BaselineArg::None => Baseline::None,
    });
    drive(Mode::Bench, args.common, b, color)
}


fn drive(mode: Mode, c: CommonArgs, baseline: Option<Baseline>, color: bool) -> u8 {
    let mut shapes = Vec::new();
    for s in &c.shapes {
        match workload::parse_shape(s) {
            Ok(s) => shapes.push(s),
            Err(e) => {
                eprintln!("error: --shape {s}: {e}");
                return 2;
            }
        }
    }
    if !(c.timeout > 0.0 && c.timeout.is_finite()) {
        eprintln!("error: --timeout must be a positive number of seconds");
        return 2;
    }
    let rules = match active_rules(c.rules.as_deref(), color) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let opts = Options {
        mode,
        program: c.file.clone(),
        workload: c.workload.clone(),
        shapes,
        dists: c.dists.iter().map(|d| Dist::from(*d)).collect(),
        timeout: Duration::from_secs_f64(c.timeout),
        unsafe_skip_verify: c.unsafe_skip_verify,
        rules: rules.set,
        evidence: harness::evidence_root(c.evidence.as_deref()),
        repeats: c.repeats,
        warmup: c.warmup,
        baseline,
        seed: c.seed,
        cublas_check: !c.no_cublas_check,
        arch: c.arch.clone(),
        exe: harness::current_exe(),
        max_timeouts: c.max_timeouts,
        rounds: c.rounds,
    };
    let name = c.file.display().to_string();
    let mut header_done = false;
    let mut on_prelude = |p: &Prelude| {
        if !p.diagnostics.is_empty() {
            eprint!("{}", cake::render::render_human(&name, &p.source, &p.diagnostics, color));
        }
        match (&p.gpu, &p.gpu_problem) {
            (Some(g), _) => eprintln!(
                "gpu: {} (sm_{}{}, {} SMs, driver {}{}), building for {}",
                g.name,
                g.cc[0],
                g.cc[1],
                g.sm_count,
                g.driver_cuda,
                g.driver_release.as_deref().map(|r| format!(" / {r}")).unwrap_or_default(),
                p.arch
            ),
            (None, Some(e)) if e.is_no_gpu() => eprintln!("SKIP ({}); building for {} only", e.message, p.arch),
            (None, Some(e)) => eprintln!("gpu: unusable: {e}"),
            (None, None) => {}
        }
        for n in &p.notes {
            eprintln!("note: {n}");
        }
    };
    let mut on_run = |o: &Outcome| {
        if !header_done {
            println!("{}", harness::table_header(mode));
            header_done = true;
        }
        println!("{}", harness::table_row(mode, o));
        if let Some(e) = &o.write_error {
            eprintln!("error: could not write the run record: {e}");
        }
    };
    match harness::run(&opts, &mut on_prelude, &mut on_run) {
        Ok(outcomes) => {
            let evidence = cake::runtime::record::runs_dir(&opts.evidence);
            let tally = cake::runtime::record::tally(&outcomes.iter().map(|o| o.record.clone()).collect::<Vec<_>>());
            let parts: Vec<String> = tally.iter().map(|(k, v)| format!("{v} {k}")).collect();
            eprintln!("{} run(s): {}; records in {}", outcomes.len(), parts.join(", "), evidence.display());
            harness::exit_status(&outcomes)
        }
        Err(HarnessError::Findings { text: source, diagnostics }) => {
            eprint!("{}", cake::render::render_human(&name, &source, &diagnostics, color));
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            eprintln!(
                "error: {name} has {errors} error finding(s); nothing ran (use --unsafe-skip-verify to run a program the verifier rejects)"
            );
            1
        }
        Err(HarnessError::Build { error, text: source, record }) => {
            eprint!("{}", cake::render::render_human(&name, &source, &error.to_diagnostics(), color));
            eprintln!(
                "error: the build failed [{}]{}",
                error.code(),
                record.map(|p| format!("; record {}", p.display())).unwrap_or_default()
            );
            1
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct LowerArgs {
    /// The `.cake` program.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Lower a program the verifier rejects.
    #[arg(long)]
    pub unsafe_skip_verify: bool,
    /// Verify with the rules under DIR (`<category>/*.toml`) instead of those of the checkout
    /// around the current directory (or, outside a checkout, the rules built into `cake`).
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Precede lines lowered from a statement with `#line L "FILE"`.
    #[arg(long)]
    pub line_directives: bool,
}

#[derive(Args, Debug, Clone)]
pub struct BuildArgs {
    /// The `.cake` program.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Directory for kernel.cu, kernel.cubin, launch.json and ptxas.json (created if needed).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// Build a program the verifier rejects.
    #[arg(long)]
    pub unsafe_skip_verify: bool,
    /// Verify with the rules under DIR (`<category>/*.toml`) instead of those of the checkout
    /// around the current directory (or, outside a checkout, the rules built into `cake`).
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
    /// Compile for this architecture instead of the program's target (`sm_90`).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
}

/// The rule set of `--rules DIR`, else of the checkout, else the embedded one; prints the
/// `note: rules: ...` line, or the E0006 error (exit 2).
fn active_rules(flag: Option<&std::path::Path>, color: bool) -> Result<ActiveRules, u8> {
    match ActiveRules::resolve(flag) {
        Ok(a) => {
            eprintln!("note: {}", a.describe());
            Ok(a)
        }
        Err(d) => {
            eprint!("{}", cake::render::render_human_unlocated(&d, color));
            Err(2)
        }
    }
}

/// Check and verify a file for `lower` / `build`; prints findings. `Err(exit status)` when it
/// cannot go on.
fn checked(
    file: &std::path::Path,
    unsafe_skip_verify: bool,
    rules: Option<&std::path::Path>,
    color: bool,
) -> Result<(String, cake::verify::Validated), u8> {
    let name = file.display().to_string();
    let source = std::fs::read_to_string(file).map_err(|e| {
        eprintln!("error: cannot read {name}: {e}");
        2u8
    })?;
    let rules = active_rules(rules, color)?;
    let out = cake::check::check_source_with(&source, &rules.set);
    if !out.diagnostics.is_empty() {
        eprint!("{}", cake::render::render_human(&name, &source, &out.diagnostics, color));
    }
    match (out.validated, out.module) {
        (Some(v), _) => Ok((source, v)),
        (None, Some(m)) if unsafe_skip_verify => Ok((source, cake::verify::Validated::assume_verified_unsafe(m))),
        _ => {
            eprintln!("error: {name} has error findings (use --unsafe-skip-verify to go on past the verifier)");
            Err(1)
        }
    }
}

/// `cake lower FILE`: print the generated CUDA C++.
pub fn lower(args: LowerArgs, color: bool) -> u8 {
    let (source, v) = match checked(&args.file, args.unsafe_skip_verify, args.rules.as_deref(), color) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let file_name = args.file.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    let mut opts = cake::lower::LowerOptions::with_source(&file_name, &source);
    opts.line_directives = args.line_directives;
    match cake::lower::lower_with(&v, &opts) {
        Ok(l) => {
            print!("{}", l.cuda);
            0
        }
        Err(e) => {
            let name = args.file.display().to_string();
            eprint!("{}", cake::render::render_human(&name, &source, &[e.to_diagnostic()], color));
            1
        }
    }
}

/// `cake build FILE -o DIR`: lower, compile with NVRTC, write the build directory.
pub fn build(args: BuildArgs, color: bool) -> u8 {
    let (source, v) = match checked(&args.file, args.unsafe_skip_verify, args.rules.as_deref(), color) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let name = args.file.display().to_string();
    let Some(target) = cake::target::TargetTable::builtin().get(&v.module().target) else {
        eprintln!("error: unknown target `{}`", v.module().target);
        return 2;
    };
    let mut target = target.clone();
    if let Some(a) = &args.arch {
        target.arch = a.clone();
    }
    let file_name = args.file.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    match cake::nvrtc::build_with(&v, &target, &cake::lower::LowerOptions::with_source(&file_name, &source)) {
        Ok(b) => {
            if !b.diagnostics.is_empty() {
                eprint!("{}", cake::render::render_human(&name, &source, &b.diagnostics, color));
            }
            if let Err(e) = cake::nvrtc::write_build_dir(&b, &args.out) {
                eprintln!("error: cannot write {}: {e}", args.out.display());
                return 2;
            }
            let r = &b.report;
            println!(
                "built {} for {}: entry `{}`, {} registers, {} B spills, {} B static + {} B dynamic shared memory, {} threads → {}",
                name,
                target.arch,
                b.entry,
                r.registers.map_or_else(|| "?".into(), |n| n.to_string()),
                r.spills(),
                r.smem_bytes,
                b.launch.dynamic_smem_bytes,
                b.launch.block_threads,
                args.out.display()
            );
            0
        }
        Err(e) => {
            eprint!("{}", cake::render::render_human(&name, &source, &e.to_diagnostics(), color));
            eprintln!("error: the build failed [{}]", e.code());
            1
        }
    }
}
