//! The barrier and pipeline protocol analysis: an abstract interpretation of every role's
//! control flow that finds hangs, data races and async-ordering mistakes before anything runs.
//!
//! # What it models
//! - **Synchronization objects** (`model.rs`): every pipeline stage has a *full* barrier
//!   (producer → consumer: one arrival, the `acquire`'s `arrive.expect_tx`, plus the TMA
//!   transaction bytes of the producer's `tma_load`s until its next `acquire`) and an *empty*
//!   barrier (consumer → producer: one `release` per stage round; the lowering makes that one
//!   elected arrival per consumer warp, and derives the count as the warp count, so one role-level
//!   release completes one phase). Every stage of an explicit `barrier` is an object with its
//!   declared `count`. Each object carries a phase counter, pending arrivals and pending
//!   transaction bytes, exactly like an `mbarrier` (Triton ConSan's abstract state).
//! - **Role-local protocol state** (`trace.rs`): a producer's acquire counter (stage = i mod S,
//!   round = i / S, waiting on the empty barrier for phase round − 1: producers start at phase 1),
//!   a consumer's wait counter and its FIFO of waited-but-unreleased stages (`release` hands back
//!   the oldest), each role's wait counter per barrier stage (the parity `wait(b)` derives).
//! - **Buffers** (`local.rs`, `sim.rs`): per shared region stage, which roles read/wrote it last,
//!   through which proxy (generic ld/st vs async TMA/wgmma), whether the writer fenced, and which
//!   async group (wgmma commit group, cp.async group, bulk store) still has it in flight.
//! - **Fragments**: per register fragment, the wgmma commit group that may still write it.
//!
//! # How it runs
//! 1. Binding-independent checks: roles using barriers and pipelines they are not listed on,
//!    and symbolic per-tile trip counts of `acquire` / `wait` / `release` (polynomials over the
//!    dims, `symbolic.rs`).
//! 2. For two concrete bindings of the dims (chosen so loops wrap around every stage count,
//!    `trace::bindings`), each role's body is unrolled into a trace of protocol events.
//!    Role-local checks (`local.rs`) and whole-program counting checks (`counts.rs`: arrivals
//!    per phase, transaction bytes per phase, waits vs completed phases) run on the traces.
//! 3. When those find no error, a scheduler runs every role "as far as it can" against the
//!    barrier objects (`sim.rs`), with vector clocks for happens-before, under several role
//!    priority orders: a state where no role can move and not all have finished is a deadlock;
//!    an access not ordered after a conflicting one is a race. The first run that fails is
//!    reported (one counterexample, like a model checker).
//!
//! Anything it cannot decide — a data-dependent `if` around synchronization, a loop bound it
//! cannot evaluate, an op whose effects it does not model, a stage index it cannot compute,
//! trip counts it can only compare on samples — is a coverage-limit finding (V950–V999), never
//! silent success.
//!
//! Out of scope (the language cannot express them): mbarrier initialization, invalidation and
//! reuse of barrier memory (barrier addresses and `mbarrier.init`/`inval` are derived by the
//! lowering), and cross-block (cluster / multicast) arrivals.
//!
//! # Decisions
//! - Arrivals: an op's arrivals per call follow its catalog `issue` (`thread` → the role's
//!   threads, `warp` → its warps, `warpgroup` → its warpgroups, `role` / `elected` → one). A
//!   pipeline `release` is one role-level arrival completing one empty-barrier phase (the lowering
//!   arrives once per consumer warp and initialises the count to the warp count: the same phase).
//! - Explicit-barrier parities: the k-th wait of a role on a barrier stage waits for phase k, or
//!   k − 1 when its first wait used parity 1 (the producer's free first pass on an empty barrier).
//! - Proxies: generic writes (st.shared, stmatrix, `store`, cp.async) need `fence_proxy_async()` by
//!   the writing role before an async read (wgmma, TMA store). A TMA overwriting generically read
//!   data needs the reader's fence *or* an mbarrier hand-off after the read (a pipeline `release`,
//!   an `arrive`): the arrive's release semantics order the reads before the producer's wait and
//!   the TMA it then issues — the CUTLASS consumer_release, and what `kmeans_assign` relies on.
//! - Granularity: a shared region is tracked per stage, and a one-stage region with a leading
//!   dimension ≤ 64 (`bf16[2, 128, 64]`) per slot of that dimension; windows inside a stage are
//!   not distinguished. Within a role, two accesses split by warp identity (an index using
//!   `R.warp` / `R.warpgroup` / `R.lane`) are assumed to touch each warp's own part.
//! - Division of labour with the rules engine (`compiler/rules/`): pipeline roles (V415–V417),
//!   stage slots other than `P.stage` (V306, V307, V311), stage-count mismatches (V401) and roles
//!   without bodies (V402, V404) are rules; this analysis does not repeat them.

mod counts;
pub(crate) mod eval;
mod local;
mod model;
mod sim;
mod symbolic;
mod trace;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use crate::diag::{Diagnostic, Severity};
use crate::ir::{BarrierDecl, Handle, Module, PipelineDecl};
use crate::target::TargetInfo;

/// Finding codes of the protocol analysis. Each has a doc file in `compiler/rules/`.
pub mod code {
    // Program safety: hangs and wrong phase accounting.
    pub const TX_BYTES: &str = "V101";
    pub const ARRIVAL_COUNT: &str = "V102";
    pub const INITIAL_PARITY: &str = "V103";
    pub const TRIP_COUNT: &str = "V104";
    pub const DEADLOCK: &str = "V105";
    pub const EXIT_WHILE_WAITED: &str = "V106";
    pub const PHASE_DESYNC: &str = "V107";
    pub const NOT_LISTED: &str = "V108";
    pub const RELEASE_UNHELD: &str = "V109";
    // Schedule semantics: ordering of accesses against the hand-offs.
    pub const READ_BEFORE_WAIT: &str = "V451";
    pub const WRITE_BEFORE_ACQUIRE: &str = "V452";
    pub const RELEASE_BEFORE_READ: &str = "V453";
    pub const OVERWRITE_IN_USE: &str = "V454";
    pub const MISSING_PROXY_FENCE: &str = "V455";
    pub const UNTRACKED_WRITE: &str = "V456";
    pub const ACC_BEFORE_WAIT: &str = "V457";
    pub const WGMMA_WAIT_SHALLOW: &str = "V458";
    // Coverage limits.
    pub const DATA_DEPENDENT: &str = "V950";
    pub const UNBOUND_TRIP: &str = "V951";
    pub const UNMODELLED_OP: &str = "V952";
    pub const UNRESOLVED_INDEX: &str = "V953";
    pub const SYMBOLIC_UNDECIDED: &str = "V954";
    pub const SIM_LIMIT: &str = "V955";

    /// Every code this analysis can report.
    pub const ALL: &[&str] = &[
        TX_BYTES,
        ARRIVAL_COUNT,
        INITIAL_PARITY,
        TRIP_COUNT,
        DEADLOCK,
        EXIT_WHILE_WAITED,
        PHASE_DESYNC,
        NOT_LISTED,
        RELEASE_UNHELD,
        READ_BEFORE_WAIT,
        WRITE_BEFORE_ACQUIRE,
        RELEASE_BEFORE_READ,
        OVERWRITE_IN_USE,
        MISSING_PROXY_FENCE,
        UNTRACKED_WRITE,
        ACC_BEFORE_WAIT,
        WGMMA_WAIT_SHALLOW,
        DATA_DEPENDENT,
        UNBOUND_TRIP,
        UNMODELLED_OP,
        UNRESOLVED_INDEX,
        SYMBOLIC_UNDECIDED,
        SIM_LIMIT,
    ];
}

/// The synchronization declaration a finding is about: findings about the same one usually
/// share a cause (one wrong loop bound makes both barriers of a ring hang).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Subject {
    Pipeline(Handle<PipelineDecl>),
    Barrier(Handle<BarrierDecl>),
}

/// Findings, deduplicated by code and primary span (the same mistake seen under two bindings
/// or two schedules is one finding).
#[derive(Default)]
pub(crate) struct Findings {
    list: Vec<(Diagnostic, Option<Subject>)>,
    seen: HashSet<(String, u32, u32)>,
}

/// Codes that report what a hang looks like rather than why it happens: never the cause of
/// another finding on the same barrier.
const CONSEQUENCE_CODES: &[&str] = &[code::DEADLOCK, code::EXIT_WHILE_WAITED, code::PHASE_DESYNC];

impl Findings {
    pub fn push(&mut self, d: Diagnostic) {
        self.push_about(d, None);
    }

    /// A finding about one barrier or pipeline (see [`Findings::into_sorted`]).
    pub fn push_about(&mut self, d: Diagnostic, subject: Option<Subject>) {
        let key = (d.code.clone(), d.primary.span.start, d.primary.span.end);
        if self.seen.insert(key) {
            self.list.push((d, subject));
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn has_error(&self) -> bool {
        self.list.iter().any(|(d, _)| d.is_error())
    }

    /// Sorted by severity and position. Of the errors about one barrier or pipeline, the first
    /// that names a cause (found first: the checks run cause-first) stays; the others are marked
    /// as following from it.
    fn into_sorted(self) -> Vec<Diagnostic> {
        let mut roots: HashMap<Subject, Diagnostic> = HashMap::new();
        for pass_consequences in [false, true] {
            for (d, subject) in &self.list {
                let Some(subject) = subject else { continue };
                let consequence = CONSEQUENCE_CODES.contains(&d.code.as_str());
                if d.is_error() && !d.is_follow_on() && consequence == pass_consequences {
                    roots.entry(*subject).or_insert_with(|| d.clone());
                }
            }
        }
        let mut list: Vec<Diagnostic> = self
            .list
            .into_iter()
            .map(|(d, subject)| match subject.and_then(|s| roots.get(&s)) {
                Some(root) if d.is_error() && !d.is_follow_on() && *root != d => d.following(root),
                _ => d,
            })
            .collect();
        list.sort_by(|a, b| {
            (a.severity != Severity::Error, a.primary.span.start, a.code.as_str()).cmp(&(
                b.severity != Severity::Error,
                b.primary.span.start,
                b.code.as_str(),
            ))
        });
        list
    }
}

/// Run the protocol analysis over every role of a type-checked module.
pub fn analyze(module: &Module, target: &TargetInfo) -> Vec<Diagnostic> {
    // The protocol depends on the program, not on the target: the checker already refused ops
    // the target lacks.
    let _ = target;
    let model = model::Model::new(module);
    let mut out = Findings::default();
    if model.actors.is_empty() {
        return Vec::new();
    }

    // 1. Binding-independent checks.
    counts::listing(&model, &mut out);
    let sym = counts::symbolic_pipeline_counts(&model);

    // 2. Traces under concrete bindings; local and counting checks.
    let bindings = trace::bindings(&model);
    let mut cov: Vec<Diagnostic> = Vec::new();
    let mut runs: Vec<(trace::Binding, Vec<trace::Trace>)> = Vec::new();
    for b in &bindings {
        let traces: Vec<trace::Trace> = (0..model.actors.len()).map(|a| trace::generate(&model, a, b, &mut cov)).collect();
        runs.push((b.clone(), traces));
    }
    let listing_errors = out.has_error();
    counts::compare_pipeline_counts(&model, &sym, &runs, &mut out);
    for (b, traces) in &runs {
        let feeds = counts::feeds(&model, traces);
        for (a, t) in traces.iter().enumerate() {
            local::check(&model, &feeds, a, t, &mut out, &mut cov);
        }
        if traces.iter().all(|t| t.complete) {
            counts::barrier_accounting(&model, b, traces, &mut out);
            counts::tx_bytes(&model, traces, &mut out, &mut cov);
            counts::block_syncs(&model, b, traces, &mut out);
        }
    }
    let _ = listing_errors;

    // 3. The cross-role simulation, when nothing above already explains a failure.
    if !out.has_error() && !model.has_bodyless_sync_role() {
        'bindings: for (b, traces) in &runs {
            if !traces.iter().all(|t| t.complete) {
                continue;
            }
            for order in sim::orders(model.actors.len()) {
                let result = sim::run(&model, traces, &order, None);
                if result.capped {
                    cov.push(sim::cap_finding(&model, b));
                    continue 'bindings;
                }
                let mut failed = false;
                for d in result.findings {
                    failed = true;
                    out.push(d.with_detail(format!("binding: {}", b.describe(module))));
                }
                if let Some(dl) = result.deadlock {
                    failed = true;
                    out.push(sim::explain_deadlock(&model, traces, &order, &dl).with_detail(format!("binding: {}", b.describe(module))));
                }
                if failed {
                    break 'bindings;
                }
            }
        }
    }

    // Coverage limits, deduplicated (the same construct under both bindings is one finding).
    let mut seen: HashMap<(String, u32), ()> = HashMap::new();
    for d in cov {
        if seen.insert((d.code.clone(), d.primary.span.start), ()).is_none() {
            out.push(d);
        }
    }
    out.into_sorted()
}
