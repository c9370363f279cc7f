//! The merge gates every compiler change must pass before it lands: the **corpus gate** (every
//! corpus case in every tier this machine has, classified against the base tree's results the
//! way Crater does) and the **principle gates** P1–P8 of Cake IR's design (paper, Appendix B).
//!
//! # Data-only gating
//! Proposals made by the evolution engine are *data*: a verifier rule file
//! (`compiler/rules/<category>/<CODE>-<slug>.toml`), an op-catalog entry (`compiler/catalog/`), a
//! calibration file (`calibration/<target>.toml`), corpus cases (`corpus/`) and a CHANGELOG line.
//! The compiler loads rules, the catalog and the target table from directories at run time, so a
//! gate does not need to build the proposal: it runs the *current* `cake` library in-process with
//! the worktree's `compiler/rules`, `compiler/catalog`, `compiler/targets.toml` and `corpus/`
//! (see [`Tree`]). A change that touches anything else — Rust sources, a `Cargo.toml`, a build
//! script — would need the worktree built with cargo; that path is **not supported yet**, and the
//! `data-only` gate fails saying so instead of gating the wrong compiler.
//!
//! # Entry point
//! [`run_gates`] takes the proposal's tree (a checkout of its branch), the base tree it is
//! compared with, and the list of changed paths; it returns a [`GateReport`] with one
//! [`GateResult`] per gate: `data-only`, `schema`, `corpus`, `accuracy` (a recalibration, judged
//! on the measured runs it commits), `P1` … `P8`, `lowering`. An evolved rule is also judged by
//! [`generalization_gate`] (does it state a cause or memorize its training programs?), which
//! needs what the rule was learned from: its caller adds that result to the report. A proposal
//! for a new fact (no predicate over today's facts separates its evidence) is judged by
//! [`analysis_gate`] instead, which fails until the compiler computes the fact.

pub mod accuracy_gate;
pub mod analysis_gate;
pub mod corpus_gate;
pub mod generalization_gate;
pub mod principles;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cake::corpus::results::GateResults;
use cake::corpus::tiers::{BuiltinCompile, BuiltinGpu, CompileBackend, GpuBackend};
use cake::corpus::Tier;

pub use report::{GateReport, GateResult, GateStatus};

/// The data paths of a Cake checkout that the compiler reads at run time.
#[derive(Clone, Debug)]
pub struct Tree {
    pub root: PathBuf,
}

impl Tree {
    pub fn new(root: impl Into<PathBuf>) -> Tree {
        Tree { root: root.into() }
    }
    /// `compiler/rules`: one TOML file per verifier rule.
    pub fn rules(&self) -> PathBuf {
        self.root.join("compiler/rules")
    }
    /// `compiler/catalog`: the op catalog, one file per op class.
    pub fn catalog(&self) -> PathBuf {
        self.root.join("compiler/catalog")
    }
    /// `compiler/targets.toml`: the target capability table.
    pub fn targets(&self) -> PathBuf {
        self.root.join("compiler/targets.toml")
    }
    /// `corpus/`: the kernel corpus.
    pub fn corpus(&self) -> PathBuf {
        self.root.join("corpus")
    }
    /// `calibration/`: cost-model parameters per target.
    pub fn calibration(&self) -> PathBuf {
        self.root.join("calibration")
    }
}

/// Paths (relative to the repository root, `/`-separated) a data-only proposal may change.
/// Everything the compiler reads at run time, plus documentation and the review queue.
pub const DATA_PATHS: &[&str] = &["compiler/rules/", "compiler/catalog/", "compiler/targets.toml", "calibration/", "corpus/", "proposals/", "CHANGELOG.md"];

/// Whether a changed path is data the in-process gate can judge.
pub fn is_data_path(path: &str) -> bool {
    if DATA_PATHS.iter().any(|p| path == p.trim_end_matches('/') || path.starts_with(p)) {
        // Rust inside a data folder is still Rust.
        return !path.ends_with(".rs");
    }
    // Documentation anywhere is fine (it is not compiled).
    path.ends_with(".md")
}

/// How a path changed between the base and the proposal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangedPath {
    pub path: String,
    pub change: Change,
}

/// What the gates run with.
#[derive(Clone)]
pub struct GateOptions {
    /// Corpus tiers to run (a tier this machine lacks is reported as skipped, not passed).
    pub tiers: Vec<Tier>,
    /// Worker threads for the corpus (0: one per core).
    pub jobs: usize,
    pub compile: Arc<dyn CompileBackend>,
    pub gpu: Arc<dyn GpuBackend>,
    /// Results of the base tree, when already known (the same base is gated many times).
    pub baseline: Option<Arc<GateResults>>,
}

impl Default for GateOptions {
    fn default() -> GateOptions {
        GateOptions {
            tiers: Tier::ALL.to_vec(),
            jobs: 0,
            compile: Arc::new(corpus_gate::CachedCompile::new(Arc::new(BuiltinCompile))),
            gpu: Arc::new(builtin_gpu()),
            baseline: None,
        }
    }
}

/// The GPU backend of the corpus gate. It runs each case in a child process of the `cake` binary
/// (its hidden job command), so from another program (`cake-evolve-compiler`) it uses the `cake`
/// found beside that program, or `$CAKE_BIN`.
pub fn builtin_gpu() -> BuiltinGpu {
    let mut g = BuiltinGpu::default();
    let sibling = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("cake")));
    if let Some(bin) = std::env::var_os("CAKE_BIN").map(PathBuf::from).or(sibling.filter(|p| p.is_file())) {
        g.exe = bin;
    }
    g
}

impl GateOptions {
    /// Only the static tier (parse, type check, verify): no toolchain, fast; what tests use.
    pub fn static_only() -> GateOptions {
        GateOptions { tiers: vec![Tier::Static], ..GateOptions::default() }
    }
}

/// Run every gate on `proposal` (a checkout of the proposal's branch), comparing with `base` (a
/// checkout of the commit it is compared with: the proposal's base, or current main when
/// accepting). `changed` lists what the proposal changes relative to `base`.
pub fn run_gates(proposal: &Path, base: &Path, changed: &[ChangedPath], opts: &GateOptions) -> GateReport {
    let (p, b) = (Tree::new(proposal), Tree::new(base));
    let mut gates = Vec::new();
    let data_only = principles::data_only(changed);
    let code_change = data_only.status == GateStatus::Fail;
    gates.push(data_only);
    let schema = principles::schema(&p);
    let loads = schema.status != GateStatus::Fail;
    gates.push(schema);
    let corpus = if code_change {
        GateResult::fail(
            "corpus",
            corpus_gate::TITLE,
            "not run: the proposal changes code, and the in-process gate would judge the current compiler, not the proposal's; building the worktree with cargo is not supported yet",
            vec![],
        )
    } else if loads {
        corpus_gate::gate(&p, &b, opts)
    } else {
        GateResult::fail("corpus", corpus_gate::TITLE, "not run: the proposal's data does not load (see `schema`)", vec![])
    };
    let corpus_green = corpus.status == GateStatus::Pass;
    let corpus_summary = corpus.summary.clone();
    gates.push(corpus);
    gates.push(if loads { accuracy_gate::gate(&p, &b, changed) } else { GateResult::fail("accuracy", accuracy_gate::TITLE, "not run: the proposal's data does not load (see `schema`)", vec![]) });
    let ctx = principles::Context::new(&p, &b, changed);
    gates.push(principles::p1(&ctx));
    gates.push(principles::p2(&ctx));
    gates.push(principles::p3(&ctx));
    gates.push(principles::p4(&ctx));
    gates.push(principles::p5(&ctx));
    gates.push(principles::p6(&ctx, corpus_green, &corpus_summary));
    gates.push(principles::p7(&ctx));
    gates.push(principles::p8(&ctx));
    gates.push(principles::lowering(&ctx));
    GateReport::new(gates)
}
