//! The cost model: predicted time and the named bottleneck of a validated schedule, per target.
//!
//! [`estimate`] walks each role's body (loops with trip counts evaluated at the given dims),
//! accumulates per-iteration op costs from the target's calibration (`calibration/<target>.toml`),
//! and combines the roles the way the schedule runs them:
//!
//! * **per main-loop iteration** (the loop that hands off pipeline stages) a role takes the
//!   longest of: its tensor-core occupancy summed over its groups, its elementwise issue work
//!   summed over its groups, its memory traffic at its share of the bandwidth, and one group's
//!   own serial path (its tensor time + its elementwise time + exposed latencies such as
//!   `wgmma_wait(0)` drains). Producer and consumer of a pipeline advance together, so the
//!   iteration takes the longer of the two; a pipeline whose stages cannot cover the round trip
//!   (hand-offs + TMA latency + the consumer's hold time) adds a **bubble** of
//!   `round_trip / stages − interval` per hand-off;
//! * **per tile**: the main loop × its trip count plus each role's work outside it (the
//!   epilogue); the tile takes the longest role path or the largest resource total
//!   (tensor cores, issue slots, memory) of all roles together; a pipeline handed off once per
//!   tile with too few stages adds a per-tile bubble; two roles that hand each other explicit
//!   barriers in both directions (X arrives on one that Y waits on, Y on one that X waits on: a
//!   ping-pong, or a full/empty ring) run in lockstep, so their paths — each `wait` charged one
//!   mbarrier hand-off — add up, divided by the ring depth (the smaller `stages` of the two
//!   barriers);
//! * **per kernel**: persistent grids run `ceil(tiles / blocks)` tiles on the busiest block,
//!   non-persistent grids run waves of `blocks/SM × SMs` blocks (co-resident blocks share the
//!   SM's resources and overlap their latencies); plus the block prologue, the pipeline fill and
//!   the launch overhead.
//!
//! Memory traffic is split into L2→SM delivery and DRAM: for each global operand the model finds
//! which tile axes its window depends on and counts, over the tiles that run concurrently (the
//! first wave in the lowering's rasterization, last axis fastest), how many blocks read each
//! window at once. Concurrent readers raise the delivery rate (measured: 8.9 TB/s with one reader
//! per line, 13.2 TB/s with four or more); an operand whose distinct windows fit in the usable L2
//! comes from DRAM once, otherwise once per wave.
//!
//! **Components and bottleneck.** The predicted time is attributed along its critical path to
//! six components that add up to it: tensor-core, memory, epilogue (ALU/SFU/shuffle/load-store
//! issue), sync/latency (exposed latencies and barriers), fill/bubble, launch. Where a resource
//! total bounds a tile, the tile's time goes to that resource; where a role's serial path bounds
//! it, the path is split into its own parts. The **bottleneck** is the largest of four classes:
//! tensor-core, memory, epilogue, and latency/sync (= sync/latency + fill/bubble + launch).
//! **Ties** (equal to 1e-9 relative) go to the first in that order — a resource is named before
//! latency — and a runner-up within 10% of the winner is reported in the notes.
//!
//! **Barriers.** `sync()` costs a block barrier; `arrive()` and `sync_role()` cost a named barrier
//! for roles of several warps and nothing for a one-warp role (the lowering's `__syncwarp()`); a
//! `wait` / `wait_parity` on an explicit barrier costs one hand-off on the waiter's path.
//!
//! **Shared memory and TMA stores.** A shared → shared element store costs one dependent step on
//! the role's path per execution, plus a replay per extra word a warp access finds in one bank
//! (strides from the derived layout, banks from the target table); `tma_store_wait(0)` costs a
//! fixed wait plus the bytes stored since the last wait at the store read rate.
//!
//! **Constant loops Cake leaves rolled** (more than 16 trips) are unrolled by the C compiler: the
//! memory round trips of their element loops overlap across `row_trips_in_flight` iterations.
//!
//! Hints (severity `hint`, codes C001…C007, one file each under `hints/`) point at the construct
//! to change; errors are [`CostError`] (codes C100…C105). Every estimate lists the provisional
//! parameters it used.

pub mod accuracy;
pub mod calibration;
mod hints;
mod model;
pub mod report;
mod walk;

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::diag::{Diagnostic, Severity};
use crate::ir::Module;
use crate::span::Span;
use crate::target::TargetTable;
use crate::verify::Validated;

pub use calibration::{Calibration, CalibrationError};

/// The four bottleneck classes, in tie-break order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bottleneck {
    TensorCore,
    Memory,
    Epilogue,
    LatencySync,
}

impl Bottleneck {
    pub const ALL: [Bottleneck; 4] = [Bottleneck::TensorCore, Bottleneck::Memory, Bottleneck::Epilogue, Bottleneck::LatencySync];

    pub fn as_str(self) -> &'static str {
        match self {
            Bottleneck::TensorCore => "tensor-core",
            Bottleneck::Memory => "memory",
            Bottleneck::Epilogue => "epilogue",
            Bottleneck::LatencySync => "latency/sync",
        }
    }
}

impl fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The predicted time attributed along its critical path; the six parts add up to
/// `predicted_ms`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Components {
    pub tensor_core_ms: f64,
    pub memory_ms: f64,
    /// Elementwise, reduction, conversion and register-store issue work.
    pub epilogue_ms: f64,
    /// Exposed latencies (wgmma drains, synchronous loads), barriers, block prologue.
    pub sync_latency_ms: f64,
    /// Pipeline fill at block start and bubbles where stages do not cover the round trip.
    pub fill_bubble_ms: f64,
    pub launch_ms: f64,
}

impl Components {
    pub fn total_ms(&self) -> f64 {
        self.tensor_core_ms + self.memory_ms + self.epilogue_ms + self.sync_latency_ms + self.fill_bubble_ms + self.launch_ms
    }

    /// Time of one bottleneck class (latency/sync gathers sync, fill/bubble and launch).
    pub fn class_ms(&self, b: Bottleneck) -> f64 {
        match b {
            Bottleneck::TensorCore => self.tensor_core_ms,
            Bottleneck::Memory => self.memory_ms,
            Bottleneck::Epilogue => self.epilogue_ms,
            Bottleneck::LatencySync => self.sync_latency_ms + self.fill_bubble_ms + self.launch_ms,
        }
    }

    /// The largest class; exact ties (1e-9 relative) go to the earlier class of [`Bottleneck::ALL`].
    pub fn bottleneck(&self) -> Bottleneck {
        let mut best = Bottleneck::TensorCore;
        for b in Bottleneck::ALL {
            if self.class_ms(b) > self.class_ms(best) * (1.0 + 1e-9) + 1e-15 {
                best = b;
            }
        }
        best
    }
}

/// Busy time of each resource on the busiest SM (not additive: resources overlap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Resources {
    pub tensor_core_ms: f64,
    /// The larger of L2→SM delivery, DRAM and SM ingest time.
    pub memory_ms: f64,
    pub l2_ms: f64,
    pub dram_ms: f64,
    /// ALU + SFU + shuffle + load/store issue.
    pub issue_ms: f64,
    pub alu_ms: f64,
    pub sfu_ms: f64,
    pub shfl_ms: f64,
    pub lsu_ms: f64,
}

/// What one role does over the kernel, on the busiest SM's critical block slot (a persistent
/// block's tiles, or one tile per round of co-resident blocks).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoleBusy {
    pub role: String,
    /// `warpgroup 1..3`, `warp 0..4`.
    pub warps: String,
    pub threads: u32,
    /// Time one group of the role spends working (not waiting): its own path summed.
    pub busy_ms: f64,
    /// The role's path through the kernel, waits included (its bubbles too).
    pub path_ms: f64,
    /// busy / predicted.
    pub utilization: f64,
    /// Iterations of the role's main loop per tile (0 without one).
    pub main_loop_iters_per_tile: f64,
}

/// Occupancy and scheduling facts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Occupancy {
    pub threads_per_block: u32,
    /// Shared memory of the regions (aligned) plus mbarriers.
    pub smem_bytes_per_block: u64,
    pub regs_per_block: u64,
    pub blocks_per_sm: u32,
    /// `shared memory`, `registers`, `threads` or `block limit`.
    pub limited_by: String,
    pub tiles: u64,
    pub persistent: bool,
    pub grid_blocks: u64,
    /// SMs with work.
    pub active_sms: u32,
    /// Tiles of the busiest block (persistent) or of the busiest SM (non-persistent).
    pub tiles_per_block_max: u64,
    pub tiles_per_block_mean: f64,
    /// tiles / (SMs × blocks per SM).
    pub waves: f64,
    /// mean / max tiles per block: the share of the last round that is used.
    pub tail_efficiency: f64,
}

/// One pipeline as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipelineFacts {
    pub pipeline: String,
    pub stages: u32,
    pub bytes_per_stage: f64,
    pub handoffs_per_tile: f64,
    /// Handed off inside the consumer's main loop (else once or a few times per tile).
    pub in_main_loop: bool,
    /// Time between hand-offs without bubbles, ns.
    pub interval_ns: f64,
    /// Round trip of one stage: hand-offs, TMA issue and latency, the consumer's hold, ns.
    pub round_trip_ns: f64,
    /// Stages that cover the round trip: ceil(round_trip / interval).
    pub stages_needed: u32,
    pub bubble_ns_per_handoff: f64,
}

/// Traffic of one global operand.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperandTraffic {
    pub tensor: String,
    /// Bytes delivered from L2 to SMs over the kernel.
    pub requested_bytes: f64,
    /// Bytes read from DRAM.
    pub dram_bytes: f64,
    /// Blocks of one wave reading each window at the same time.
    pub concurrent_readers: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Traffic {
    pub tensor_flops: f64,
    pub l2_to_sm_bytes: f64,
    pub dram_read_bytes: f64,
    pub dram_write_bytes: f64,
    pub operands: Vec<OperandTraffic>,
}

/// Which calibration an estimate used.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CalibrationUsed {
    pub file: String,
    pub fitted_on: String,
    /// Provisional parameters (not measured on the device yet) this estimate read.
    pub provisional_used: Vec<String>,
}

/// A cost estimate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub kernel: String,
    pub target: String,
    pub dims: BTreeMap<String, i64>,
    pub predicted_ms: f64,
    pub bottleneck: Bottleneck,
    /// Share of the predicted time the bottleneck class accounts for.
    pub bottleneck_share: f64,
    pub components: Components,
    pub resources: Resources,
    pub roles: Vec<RoleBusy>,
    pub pipelines: Vec<PipelineFacts>,
    pub occupancy: Occupancy,
    pub traffic: Traffic,
    /// Tensor FLOPs / predicted time, where the program has tensor-core work.
    pub tflops: Option<f64>,
    pub hints: Vec<Diagnostic>,
    pub notes: Vec<String>,
    pub calibration: CalibrationUsed,
}

/// Why no estimate was made.
#[derive(Clone, Debug, PartialEq)]
pub enum CostError {
    /// C100: the target has no calibration file; the model predicts nothing there.
    NotCalibrated { target: String },
    /// C101: dims the program declares but the shape does not bind (name, declaration span).
    MissingDims { dims: Vec<(String, Span)> },
    /// C102: a dim value the program cannot take.
    BadDim { name: String, value: i64, reason: String, span: Span },
    /// C103: the block needs more than an SM has, or the tile space is empty.
    DoesNotFit { reason: String, span: Span },
    /// C104: a calibration file for another target.
    TargetMismatch { program: String, calibration: String, file: String },
    /// C105: a calibration file that does not load.
    BadCalibration(CalibrationError),
}

impl CostError {
    pub fn code(&self) -> &'static str {
        match self {
            CostError::NotCalibrated { .. } => "C100",
            CostError::MissingDims { .. } => "C101",
            CostError::BadDim { .. } => "C102",
            CostError::DoesNotFit { .. } => "C103",
            CostError::TargetMismatch { .. } => "C104",
            CostError::BadCalibration(_) => "C105",
        }
    }

    /// The error as a located diagnostic (spans into the program's source where there is one).
    pub fn to_diagnostic(&self) -> Diagnostic {
        let d = Diagnostic::error(self.code(), self.to_string(), self.span(), self.label());
        match self {
            CostError::NotCalibrated { target } => d
                .with_note(format!(
                    "the cost model predicts only where `calibration/{target}.toml` exists; it never borrows another target's numbers"
                ))
                .with_help(format!(
                    "calibrated targets: {}; or pass `--calibration FILE` with measured parameters for `{target}`",
                    Calibration::builtin_targets().join(", ")
                )),
            CostError::MissingDims { dims } => {
                let mut d = d.with_help(format!(
                    "give every dim a value, e.g. `--shape {}`",
                    dims.iter().map(|(n, _)| format!("{n}=...")).collect::<Vec<_>>().join(",")
                ));
                for (name, span) in dims.iter().skip(1) {
                    d = d.with_secondary(*span, format!("`{name}` has no value either"));
                }
                d
            }
            CostError::BadCalibration(_) => d.with_help("fix the file; calibration/README.md describes the schema"),
            _ => d,
        }
    }

    fn span(&self) -> Span {
        match self {
            CostError::MissingDims { dims } => dims.first().map_or(Span::default(), |(_, s)| *s),
            CostError::BadDim { span, .. } | CostError::DoesNotFit { span, .. } => *span,
            _ => Span::default(),
        }
    }

    fn label(&self) -> String {
        match self {
            CostError::MissingDims { dims } => format!("`{}` has no value", dims[0].0),
            CostError::BadDim { name, value, .. } => format!("`{name}` = {value}"),
            CostError::DoesNotFit { .. } => "declared here".into(),
            _ => String::new(),
        }
    }
}

impl fmt::Display for CostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CostError::NotCalibrated { target } => write!(f, "target `{target}` is not calibrated: no cost prediction"),
            CostError::MissingDims { dims } => {
                let names: Vec<String> = dims.iter().map(|(n, _)| format!("`{n}`")).collect();
                write!(f, "cannot predict the cost without a value for {}", names.join(", "))
            }
            CostError::BadDim { name, value, reason, .. } => write!(f, "dim `{name}` = {value}: {reason}"),
            CostError::DoesNotFit { reason, .. } => write!(f, "{reason}"),
            CostError::TargetMismatch { program, calibration, file } => {
                write!(f, "the program targets `{program}` but `{file}` calibrates `{calibration}`")
            }
            CostError::BadCalibration(e) => write!(f, "invalid calibration: {e}"),
        }
    }
}

impl std::error::Error for CostError {}

/// The built-in calibration for a module's target: [`CostError::NotCalibrated`] when there is
/// none.
pub fn builtin_calibration(target: &str) -> Result<&'static Calibration, CostError> {
    match Calibration::builtin(target) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(CostError::NotCalibrated { target: target.to_string() }),
        Err(e) => Err(CostError::BadCalibration(e)),
    }
}

/// Predict the cost of a validated program at the given dims with a target's parameters.
pub fn estimate(v: &Validated, params: &Calibration, dims: &BTreeMap<String, i64>) -> Result<Estimate, CostError> {
    let m = v.module();
    if params.meta.target != m.target {
        return Err(CostError::TargetMismatch {
            program: m.target.clone(),
            calibration: params.meta.target.clone(),
            file: params.file.clone(),
        });
    }
    let target = TargetTable::builtin()
        .get(&m.target)
        .ok_or_else(|| CostError::NotCalibrated { target: m.target.clone() })?;
    let values = resolve_dims(m, dims)?;
    let mut est = model::run(m, v.layout(), params, target, values, dims)?;
    if v.unverified {
        est.notes.insert(0, "the program was not verified (assume_verified_unsafe): the estimate assumes it is correct".into());
    }
    Ok(est)
}

/// Estimate with the built-in calibration of the program's target.
pub fn estimate_builtin(v: &Validated, dims: &BTreeMap<String, i64>) -> Result<Estimate, CostError> {
    let cal = builtin_calibration(&v.module().target)?;
    estimate(v, cal, dims)
}

/// Dim values by dim handle index; every dim must be bound, positive and a multiple of its
/// declared `multiple_of`.
fn resolve_dims(m: &Module, dims: &BTreeMap<String, i64>) -> Result<Vec<i64>, CostError> {
    let mut values = Vec::with_capacity(m.dims.len());
    let mut missing = Vec::new();
    for (h, d) in m.dims.iter() {
        match dims.get(&d.name) {
            Some(&v) => {
                let span = m.dims.span(h).name;
                if v <= 0 {
                    return Err(CostError::BadDim { name: d.name.clone(), value: v, reason: "dims must be positive".into(), span });
                }
                // The lowered kernel takes every dim as a 32-bit `const int` parameter.
                if v > i64::from(i32::MAX) {
                    return Err(CostError::BadDim {
                        name: d.name.clone(),
                        value: v,
                        reason: format!("larger than the kernel's 32-bit dim parameters hold (at most {})", i32::MAX),
                        span,
                    });
                }
                if let Some(k) = d.multiple_of {
                    if k > 0 && v % k != 0 {
                        return Err(CostError::BadDim {
                            name: d.name.clone(),
                            value: v,
                            reason: format!("not a multiple of {k} (declared `multiple_of {k}`)"),
                            span: m.dims.span(h).attr("multiple_of"),
                        });
                    }
                }
                values.push(v);
            }
            None => {
                missing.push((d.name.clone(), m.dims.span(h).name));
                values.push(0);
            }
        }
    }
    if !missing.is_empty() {
        return Err(CostError::MissingDims { dims: missing });
    }
    Ok(values)
}

/// A non-blocking hint at `span`.
pub(crate) fn hint(code: &str, message: String, span: Span, label: impl Into<String>) -> Diagnostic {
    Diagnostic::error(code, message, span, label).with_severity(Severity::Hint)
}
