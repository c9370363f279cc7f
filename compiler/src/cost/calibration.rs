//! Cost-model parameters per target (`calibration/<target>.toml`).
//!
//! A calibration file names its target, says where its numbers come from, and gives every
//! parameter of [`SPECS`] exactly once with its unit. Nothing has a default: a missing, misspelt,
//! extra or wrongly-united parameter is an error, so a model change that needs a new parameter
//! cannot run on numbers nobody measured. A target without a file is *not calibrated* and gets no
//! prediction (never another target's numbers).
//!
//! The built-in files are embedded at build time (`build.rs`, `embed_toml_dir("../calibration")`);
//! [`Calibration::load`] and [`Calibration::from_toml_str`] read a replacement at run time (a
//! recalibration proposal, `cake cost --calibration FILE`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_calibration.rs"));
}

/// Every parameter the model reads. The discriminant indexes [`SPECS`] and the value table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum P {
    SmCount,
    L2Bytes,
    L2ReuseFraction,
    TensorBf16FlopsPerS,
    TensorFp8FlopsPerS,
    TensorSustainedFraction,
    MmaSyncFlopsPerS,
    WgmmaWaitLatencyNs,
    SmemReadBytesPerSPerSm,
    DramBytesPerS,
    L2BytesPerS,
    L2SharedBytesPerS,
    SmIngestBytesPerS,
    TmaLatencyDramNs,
    TmaLatencyL2Ns,
    TmaIssueNs,
    PipelineAcquireNs,
    LoadLatencyNs,
    RowTripsInFlight,
    RowTripLatencyNs,
    L1BytesPerSm,
    L1HitLatencyNs,
    DivLatencyNs,
    TmaStoreWaitNs,
    TmaStoreReadBytesPerSPerSm,
    StoreSectorEfficiency,
    LsuElemsPerSPerSm,
    AluElemsPerSPerSm,
    IssueSlotsPerSPerSm,
    SfuElemsPerSPerSm,
    ShflElemsPerSPerSm,
    SmemElementStepNs,
    SmemConflictReplayNs,
    ArgIndexAluSlots,
    TensorIssueOverlap,
    ReduceStepLatencyNs,
    CastAluSlots,
    SqrtAluSlots,
    DivAluSlots,
    SingleWarpIssueEfficiency,
    MbarrierHandoffNs,
    BarSyncNs,
    FenceProxyAsyncNs,
    ClusterSyncNs,
    LaunchOverheadNs,
    CtaWaveNs,
    CtaPrologueNs,
    PipelineSetupNs,
    DefaultRegsPerThread,
    FragmentRegOverhead,
}

/// What a parameter is: its file name, its unit, and the range of sane values.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub param: P,
    pub name: &'static str,
    pub unit: &'static str,
    /// `fraction` parameters must lie in (0, 1]; everything else must be positive.
    pub what: &'static str,
}

const fn s(param: P, name: &'static str, unit: &'static str, what: &'static str) -> Spec {
    Spec { param, name, unit, what }
}

/// The parameter table, in [`P`] order.
pub const SPECS: &[Spec] = &[
    s(P::SmCount, "sm_count", "count", "SMs of the calibrated device"),
    s(P::L2Bytes, "l2_bytes", "bytes", "L2 capacity"),
    s(P::L2ReuseFraction, "l2_reuse_fraction", "fraction", "share of L2 reused operands may occupy"),
    s(P::TensorBf16FlopsPerS, "tensor_bf16_flops_per_s", "FLOP/s", "raw wgmma rate, bf16/f16, whole GPU"),
    s(P::TensorFp8FlopsPerS, "tensor_fp8_flops_per_s", "FLOP/s", "raw wgmma rate, e4m3/e5m2, whole GPU"),
    s(P::TensorSustainedFraction, "tensor_sustained_fraction", "fraction", "sustained / raw tensor rate while operands stream in through a pipeline"),
    s(P::MmaSyncFlopsPerS, "mma_sync_flops_per_s", "FLOP/s", "mma.sync rate, whole GPU"),
    s(P::WgmmaWaitLatencyNs, "wgmma_wait_latency_ns", "ns", "exposed drain at wgmma_wait(0)"),
    s(P::SmemReadBytesPerSPerSm, "smem_read_bytes_per_s_per_sm", "B/s per SM", "shared-memory operand bandwidth"),
    s(P::DramBytesPerS, "dram_bytes_per_s", "B/s", "DRAM bandwidth"),
    s(P::L2BytesPerS, "l2_bytes_per_s", "B/s", "L2 to SM delivery, one reader per line"),
    s(P::L2SharedBytesPerS, "l2_shared_bytes_per_s", "B/s", "L2 to SM delivery, 4+ concurrent readers per line"),
    s(P::SmIngestBytesPerS, "sm_ingest_bytes_per_s", "B/s per SM", "what one SM can take in"),
    s(P::TmaLatencyDramNs, "tma_latency_dram_ns", "ns", "TMA issue to complete_tx, DRAM"),
    s(P::TmaLatencyL2Ns, "tma_latency_l2_ns", "ns", "TMA issue to complete_tx, L2 hit"),
    s(P::TmaIssueNs, "tma_issue_ns", "ns", "producer time per tma_load"),
    s(P::PipelineAcquireNs, "pipeline_acquire_ns", "ns", "producer time per acquire of a stage: the empty barrier's wait returning, arrive.expect_tx"),
    s(P::LoadLatencyNs, "load_latency_ns", "ns", "dependent global load latency"),
    s(P::RowTripsInFlight, "row_trips_in_flight", "count", "element-loop round trips the C compiler overlaps in a constant loop Cake does not unroll"),
    s(P::RowTripLatencyNs, "row_trip_latency_ns", "ns", "unloaded latency of an element loop's round trip to DRAM (each trip also waits for the bytes every warp has in flight)"),
    s(P::L1BytesPerSm, "l1_bytes_per_sm", "bytes", "unified L1 data cache and shared memory of one SM (the L1 gets what shared memory leaves)"),
    s(P::L1HitLatencyNs, "l1_hit_latency_ns", "ns", "global load that hits the SM's L1"),
    s(P::DivLatencyNs, "div_latency_ns", "ns", "one IEEE f32 division on a lane's path in an element loop (its slow-path branch also keeps the loop's steps from overlapping)"),
    s(P::TmaStoreWaitNs, "tma_store_wait_ns", "ns", "fixed part of tma_store_wait(0): until the stores in flight have read shared memory"),
    s(P::TmaStoreReadBytesPerSPerSm, "tma_store_read_bytes_per_s_per_sm", "B/s per SM", "rate at which one SM's TMA stores in flight read shared memory, as tma_store_wait(0) sees it"),
    s(P::StoreSectorEfficiency, "store_sector_efficiency", "fraction", "useful share of register-store sectors"),
    s(P::LsuElemsPerSPerSm, "lsu_elems_per_s_per_sm", "elements/s per SM", "load/store instruction rate"),
    s(P::AluElemsPerSPerSm, "alu_elems_per_s_per_sm", "elements/s per SM", "FFMA-equivalent ALU rate"),
    s(P::IssueSlotsPerSPerSm, "issue_slots_per_s_per_sm", "elements/s per SM", "thread-level instructions the SM's schedulers dispatch, all pipes together"),
    s(P::SfuElemsPerSPerSm, "sfu_elems_per_s_per_sm", "elements/s per SM", "special-function rate"),
    s(P::ShflElemsPerSPerSm, "shfl_elems_per_s_per_sm", "elements/s per SM", "shuffle rate"),
    s(P::SmemElementStepNs, "smem_element_step_ns", "ns", "one shared -> shared element step of a role (dependent ld.shared, st.shared)"),
    s(P::SmemConflictReplayNs, "smem_conflict_replay_ns", "ns", "per extra bank-conflict way of a warp's shared access"),
    s(P::ArgIndexAluSlots, "arg_index_alu_slots", "ALU slots per element", "index pass of an argmin/argmax, per element"),
    s(P::TensorIssueOverlap, "tensor_issue_overlap", "fraction", "share of a group's own work under its running MMAs that overlaps them"),
    s(P::ReduceStepLatencyNs, "reduce_step_latency_ns", "ns", "latency of one dependent min/max/sum step"),
    s(P::CastAluSlots, "cast_alu_slots", "ALU slots per element", "cost of a conversion"),
    s(P::SqrtAluSlots, "sqrt_alu_slots", "ALU slots per element", "ALU part of sqrt"),
    s(P::DivAluSlots, "div_alu_slots", "ALU slots per element", "issue slots of an IEEE f32 division's fast path (MUFU.RCP, Newton steps, the slow-path check)"),
    s(P::SingleWarpIssueEfficiency, "single_warp_issue_efficiency", "fraction", "issue share of a lone warp"),
    s(P::MbarrierHandoffNs, "mbarrier_handoff_ns", "ns", "arrive in one warp to wait returning in another"),
    s(P::BarSyncNs, "bar_sync_ns", "ns", "block / named barrier"),
    s(P::FenceProxyAsyncNs, "fence_proxy_async_ns", "ns", "fence.proxy.async"),
    s(P::ClusterSyncNs, "cluster_sync_ns", "ns", "cluster barrier"),
    s(P::LaunchOverheadNs, "launch_overhead_ns", "ns", "launch overhead of a timed kernel"),
    s(P::CtaWaveNs, "cta_wave_ns", "ns", "per extra wave of blocks"),
    s(P::CtaPrologueNs, "cta_prologue_ns", "ns", "per-block start"),
    s(P::PipelineSetupNs, "pipeline_setup_ns", "ns", "once per kernel with a pipeline: its start beyond an empty launch (tensor maps, barriers, first round trip, last store)"),
    s(P::DefaultRegsPerThread, "default_regs_per_thread", "registers per thread", "registers of roles without `regs`"),
    s(P::FragmentRegOverhead, "fragment_reg_overhead", "registers per thread", "registers a role without `regs` holds beyond its declared fragments (addresses, indices, loop state)"),
];

/// One parameter as written in the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub value: f64,
    pub unit: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provisional: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Accuracy of the last fit over GPU corpus measurements; empty until a calibration run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accuracy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spearman: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mape: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k_recall: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub target: String,
    pub device: String,
    /// Date of the last least-squares fit; empty when the values are initial measurements only.
    pub fitted_on: String,
    /// Commands and run records the values come from.
    pub source: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default)]
    pub accuracy: Accuracy,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    meta: Meta,
    param: BTreeMap<String, Param>,
}

/// A validated parameter file for one target.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// Where it was read from (`calibration/sm_90a.toml` for the built-in ones).
    pub file: String,
    pub meta: Meta,
    /// Every parameter, by name, as written.
    pub params: BTreeMap<String, Param>,
    values: Vec<f64>,
    provisional: u64,
}

/// A calibration file that failed to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrationError {
    pub file: String,
    pub message: String,
}

impl fmt::Display for CalibrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for CalibrationError {}

impl Calibration {
    /// Parse and validate a parameter file; `file` names it in errors.
    pub fn from_toml_str(file: &str, text: &str) -> Result<Calibration, CalibrationError> {
        let err = |message: String| CalibrationError { file: file.to_string(), message };
        let parsed: File = toml::from_str(text).map_err(|e| err(e.to_string().trim_end().to_string()))?;
        if parsed.meta.target.trim().is_empty() {
            return Err(err("`[meta] target` is empty".into()));
        }
        let mut values = vec![f64::NAN; SPECS.len()];
        let mut provisional = 0u64;
        for (name, p) in &parsed.param {
            let Some(spec) = SPECS.iter().find(|s| s.name == name) else {
                return Err(err(format!("unknown parameter `{name}` (the model reads: {})", names().join(", "))));
            };
            if p.unit != spec.unit {
                return Err(err(format!("parameter `{name}`: unit `{}`, expected `{}`", p.unit, spec.unit)));
            }
            let ok = p.value.is_finite() && p.value > 0.0 && (spec.unit != "fraction" || p.value <= 1.0);
            if !ok {
                let range = if spec.unit == "fraction" { "in (0, 1]" } else { "positive and finite" };
                return Err(err(format!("parameter `{name}` = {} must be {range}", p.value)));
            }
            if p.source.trim().is_empty() {
                return Err(err(format!("parameter `{name}` has no `source`")));
            }
            values[spec.param as usize] = p.value;
            if p.provisional {
                provisional |= 1 << spec.param as u64;
            }
        }
        let missing: Vec<&str> = SPECS.iter().filter(|s| values[s.param as usize].is_nan()).map(|s| s.name).collect();
        if !missing.is_empty() {
            return Err(err(format!("missing parameter(s): {}", missing.join(", "))));
        }
        Ok(Calibration { file: file.to_string(), meta: parsed.meta, params: parsed.param, values, provisional })
    }

    /// Read, parse and validate a parameter file.
    pub fn load(path: impl AsRef<Path>) -> Result<Calibration, CalibrationError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| CalibrationError { file: name.clone(), message: format!("cannot read: {e}") })?;
        Calibration::from_toml_str(&name, &text)
    }

    /// The built-in calibration of `target`: `Ok(None)` when the target has no file (not
    /// calibrated), `Err` when the embedded file is invalid (a bug the crate's tests rule out).
    pub fn builtin(target: &str) -> Result<Option<&'static Calibration>, CalibrationError> {
        static TABLE: OnceLock<BTreeMap<String, Result<Calibration, CalibrationError>>> = OnceLock::new();
        let table = TABLE.get_or_init(|| {
            embedded::CALIBRATION_TOML
                .iter()
                .map(|(name, text)| {
                    let stem = name.trim_end_matches(".toml").to_string();
                    let file = format!("calibration/{name}");
                    let parsed = Calibration::from_toml_str(&file, text).and_then(|c| {
                        if c.meta.target == stem {
                            Ok(c)
                        } else {
                            Err(CalibrationError {
                                file: file.clone(),
                                message: format!("`[meta] target = \"{}\"` does not match the file name", c.meta.target),
                            })
                        }
                    });
                    (stem, parsed)
                })
                .collect()
        });
        match table.get(target) {
            None => Ok(None),
            Some(Ok(c)) => Ok(Some(c)),
            Some(Err(e)) => Err(e.clone()),
        }
    }

    /// Targets with a built-in calibration file.
    pub fn builtin_targets() -> Vec<&'static str> {
        embedded::CALIBRATION_TOML.iter().map(|(n, _)| n.trim_end_matches(".toml")).collect()
    }

    /// The value of a parameter.
    pub fn get(&self, p: P) -> f64 {
        self.values[p as usize]
    }

    /// Whether a parameter is marked provisional.
    pub fn is_provisional(&self, p: P) -> bool {
        self.provisional & (1 << p as u64) != 0
    }

    /// Names of the provisional parameters among `used` (a bit set over [`P`]).
    pub fn provisional_names(&self, used: u64) -> Vec<&'static str> {
        SPECS.iter().filter(|s| used & self.provisional & (1 << s.param as u64) != 0).map(|s| s.name).collect()
    }
}

/// Every parameter name the model reads, in table order.
pub fn names() -> Vec<&'static str> {
    SPECS.iter().map(|s| s.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_in_enum_order() {
        for (i, s) in SPECS.iter().enumerate() {
            assert_eq!(s.param as usize, i, "{}", s.name);
        }
        assert!(SPECS.len() <= 64, "the provisional mask is a u64");
    }

    #[test]
    fn builtin_files_are_valid() {
        for t in Calibration::builtin_targets() {
            let c = Calibration::builtin(t).unwrap().unwrap();
            assert_eq!(c.meta.target, t);
        }
    }
}
