//! Mining: evidence → signatures → buckets, ranked by recurrence and cost (like syzbot's and
//! Socorro's crash buckets).
//!
//! # Observations
//! Every record yields zero or more *observations* (one failure each):
//! * a run record that did not pass: its error class (`CUDA_ERROR_ILLEGAL_ADDRESS`, `timeout`,
//!   `SIGSEGV`, `tma_*`, `build_L002`, …) or, for a wrong answer, `mismatch` with the oracle and
//!   the mismatch pattern ([`mismatch_pattern`]); a build failure whose message holds an NVRTC /
//!   ptxas log is split into the log's own failures (`ptxas.too_much_shared_data`, …);
//! * any run record: the notable lines of its ptxas report (spills, ignored `setmaxnreg`,
//!   serialized wgmma), once per program;
//! * a failure report: its class and message; with `extra.predicted_ms` and `extra.measured_ms`,
//!   the predicted/measured ratio bin instead of the message (cost-model evidence);
//! * a run record that passed and carries the cost model's `prediction`: when the
//!   predicted/measured ratio falls outside the accurate bin, a `cost_model.misprediction`
//!   observation with the ratio bin and the named bottleneck (evidence for recalibration).
//!
//! Records that passed, were skipped (no GPU), or failed for the harness's own reasons
//! ([`HARNESS_CLASSES`]: a bad workload spec, I/O) yield nothing else.
//!
//! # Superseded records
//! A run record of a build failure (`build_L0xx`, `build_N0xx`) is left out when the same program
//! (same `program.sha256`) has a newer run record (`created_unix_ms`) made by a different compiler
//! (`cake.version` / `cake.git_commit`) that got past the build: it built, and ran or was skipped
//! for want of a GPU. The failure was the old compiler's (a capability it lacked, a bug since
//! fixed), not the program's; how the program fails now is in the newer record. Such records are
//! counted in the report's warnings (`M002`). Failure reports carry no time or compiler version and
//! are never superseded; nor are failures at run time (a later pass may be luck).
//!
//! # Signatures
//! `stage/class: detail`, where detail is the message's first line [`normalize`]d (hex addresses,
//! numbers, paths and temp dirs, hashes, quoted symbol names replaced by placeholders), the
//! mismatch pattern, `hung at <stage>` for a timeout, or the ratio bin. A wrong answer whose
//! wrong elements no writer stores (attribution 4 below) is `run/mismatch: never written`: what
//! is wrong, not which oracle saw it nor the shape its ten reported indices make, so a GEMM and a
//! layer norm that both leave outputs unwritten share a bucket (on the owner they are attributed
//! to). Classes themselves are
//! kept: CUDA error names, ptxas message classes (`ptxas.C7508`), sanitizer classes
//! (`memcheck.invalid_global_read`, `racecheck.hazard_raw`, `synccheck.barrier_error.*`).
//!
//! # Attribution
//! Each observation is tied to the IR construct involved, in this order:
//! 1. `span`: a `.cake` line (from `#line` marks or a tool), a generated-CUDA line mapped back
//!    through the lowering's span map (the program is lowered again, unverified, exactly as the
//!    harness lowers it), or a byte span in a lowering error → the construct of the verifier's
//!    facts written there: for a whole line the outermost declaration or call starting on it,
//!    otherwise the smallest one containing the span (`call`+op, `smem`, `pipeline`, …; a `for`
//!    loop is no construct, so a loop header falls through to the next rule);
//! 2. `facts`: by what the failure class implicates, looked up in the program's facts: hangs,
//!    races and barrier errors → the explicit barrier calls (`arrive_expect_tx`, `wait_parity`,
//!    `arrive`), else the pipelines, else the barriers; memory faults and TMA errors → the async
//!    copies (`tma_load`, `tma_store`, `cp_async`); shared-memory limits → `smem`; register
//!    limits and spills → `role`; serialized wgmma → the `wgmma` calls;
//! 3. `finding:<code>`: the first non-blocking verifier finding (coverage limit, warning) whose
//!    span lies in a construct: what the verifier could not decide is the suspect;
//! 4. a wrong answer whose wrong elements nobody writes: their owner (`owner:*`, [`crate::attribute`]);
//! 5. `none`: `kernel`.
//!
//! # Buckets and ranking
//! A bucket is (signature, construct kind, op); its id is the first 12 hex digits of the
//! SHA-256 of `signature \n construct_kind \n op`. Cost is GPU seconds lost: a failure report's
//! `gpu_seconds`, else the run's measured time plus a second of set-up; a timeout counts twice
//! its wall-clock limit (a hang holds the GPU for the whole limit and the context must be torn
//! down); compile and verify failures cost nothing on the GPU. Score =
//! `programs × (1 + log2(1 + cost))`: recurrence across distinct programs first, cost second.
//! Buckets are ordered by score, then programs, then cost (all descending), then id; everything
//! inside a bucket is sorted, so the same store always mines to the same bytes.

use cake::corpus::tiers::Frontend;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use cake::diag::Severity;
use cake::ir::Module;
use cake::runtime::job::Verdict;
use cake::runtime::record::{sha256_hex, RunRecord};
use cake::span::Span;
use cake::verify::{ConstructKind, ModuleFacts};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::import::parse_ptxas;
// Re-exported: signatures are built from it, and callers know it as `mine::normalize`.
pub use crate::normalize::normalize;
use crate::Format;
use crate::stale::Recheck;
use crate::store::{EvidenceStore, FailureReport, Record, SpanKind, SpanRef, Stage, StoreError, Stored};

// ─── Normalization ───────────────────────────────────────────────────────────────────────────────

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("mining regex"))
}

/// The first line of a message, normalized and cut to 200 characters.
fn detail_of(message: &str) -> String {
    let first = message.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let n = normalize(first);
    if n.chars().count() > 200 {
        n.chars().take(200).collect::<String>() + "…"
    } else {
        n
    }
}

// ─── Mismatch patterns ───────────────────────────────────────────────────────────────────────────

/// The shape of a wrong answer, from the indices of wrong elements (any number of them, in any
/// order; index vectors outermost first) and the counts:
/// * `all`: at least 99 % of the checked elements are wrong;
/// * `tile-periodic`: along the column (or row) axis the wrong positions repeat with a period
///   `T` ∈ {8, 16, 32, 64, 128, 256} smaller than the axis — the same offsets in two or more tiles,
///   not the whole tile;
/// * `column-stripes`: wrong elements on two or more rows, in at most half as many distinct
///   columns as there are wrong elements;
/// * `rows`: wrong elements on few rows, each a contiguous run of columns;
/// * `scattered`: anything else;
///
/// and `+nonfinite` when some output elements are NaN/Inf (never written, or garbage).
/// Rows are everything but the last axis (flattened), columns the last axis.
pub fn mismatch_pattern(shape: &[u64], checked: u64, mismatches: u64, nonfinite: u64, bad: &[Vec<u64>]) -> String {
    let suffix = if nonfinite > 0 { "+nonfinite" } else { "" };
    if mismatches == 0 && nonfinite == 0 && bad.is_empty() {
        return "none".into();
    }
    if checked > 0 && mismatches as f64 >= 0.99 * checked as f64 {
        return format!("all{suffix}");
    }
    let cols_dim = shape.last().copied().unwrap_or(0);
    let row_of = |idx: &Vec<u64>| -> u64 {
        let lead = &idx[..idx.len().saturating_sub(1)];
        let lead_shape = &shape[..shape.len().saturating_sub(1)];
        let mut r = 0u64;
        for (i, v) in lead.iter().enumerate() {
            let d = lead_shape.get(i).copied().unwrap_or(1).max(1);
            r = r.saturating_mul(d).saturating_add(*v);
        }
        r
    };
    let pts: BTreeSet<(u64, u64)> = bad.iter().filter(|i| !i.is_empty()).map(|i| (row_of(i), *i.last().unwrap_or(&0))).collect();
    if pts.is_empty() {
        return format!("scattered{suffix}");
    }
    let rows: BTreeSet<u64> = pts.iter().map(|p| p.0).collect();
    let cols: BTreeSet<u64> = pts.iter().map(|p| p.1).collect();
    let rows_dim = {
        let lead: u64 = shape[..shape.len().saturating_sub(1)].iter().product();
        if shape.len() <= 1 {
            1
        } else {
            lead
        }
    };
    let periodic = |coords: &BTreeSet<u64>, dim: u64| -> bool {
        for t in [8u64, 16, 32, 64, 128, 256] {
            if dim != 0 && t >= dim {
                break;
            }
            let tiles: BTreeSet<u64> = coords.iter().map(|c| c / t).collect();
            let residues: BTreeSet<u64> = coords.iter().map(|c| c % t).collect();
            if tiles.len() < 2 || residues.len() as u64 >= t {
                continue;
            }
            // The same offsets recur in every tile that has any, and the tiles are not adjacent
            // runs of one block (a contiguous run spanning a tile boundary is not periodic).
            let per_tile: BTreeMap<u64, BTreeSet<u64>> = coords.iter().fold(BTreeMap::new(), |mut m, c| {
                m.entry(c / t).or_insert_with(BTreeSet::new).insert(c % t);
                m
            });
            let first = per_tile.values().next().cloned().unwrap_or_default();
            let same = per_tile.values().filter(|s| **s == first).count();
            let contiguous = coords.iter().zip(coords.iter().skip(1)).all(|(a, b)| b - a == 1);
            if same >= 2 && !contiguous {
                return true;
            }
        }
        false
    };
    let base = if periodic(&cols, cols_dim) || periodic(&rows, rows_dim) {
        "tile-periodic"
    } else if rows.len() >= 2 && cols.len() * 2 <= pts.len() {
        "column-stripes"
    } else if rows.len() * 2 <= pts.len().max(2) && rows.iter().all(|r| {
        let cs: Vec<u64> = pts.iter().filter(|p| p.0 == *r).map(|p| p.1).collect();
        cs.windows(2).all(|w| w[1] == w[0] + 1)
    }) {
        "rows"
    } else {
        "scattered"
    };
    format!("{base}{suffix}")
}

/// Predicted/measured time ratio bin (cost-model evidence).
pub fn ratio_bin(predicted: f64, measured: f64) -> String {
    if !(predicted > 0.0 && measured > 0.0) {
        return "ratio unknown".into();
    }
    let r = predicted / measured;
    let bin = match r {
        r if r < 0.5 => "<0.5 (predicted far too fast)",
        r if r < 0.8 => "0.5-0.8 (predicted too fast)",
        r if r <= 1.25 => "0.8-1.25 (accurate)",
        r if r <= 2.0 => "1.25-2 (predicted too slow)",
        _ => ">2 (predicted far too slow)",
    };
    format!("predicted/measured {bin}")
}

// ─── Observations ────────────────────────────────────────────────────────────────────────────────

/// Where an observation points in the program before attribution.
#[derive(Clone, Debug, PartialEq)]
enum Locus {
    None,
    Line(SpanRef),
    Bytes(Span),
}

/// One failure seen in one record.
#[derive(Clone, Debug)]
struct Observation {
    evidence: String,
    program: String,
    target: String,
    stage: Stage,
    class: String,
    detail: String,
    message: String,
    locus: Locus,
    cost: f64,
    /// A recorded build failure (lowering refusal, NVRTC / ptxas error): the current compiler
    /// can try the build again (`stale.rs`). Compile facts of a build that passed are not.
    build_failure: bool,
}

impl Observation {
    fn signature(&self) -> String {
        if self.detail.is_empty() {
            format!("{}/{}", self.stage.as_str(), self.class)
        } else {
            format!("{}/{}: {}", self.stage.as_str(), self.class, self.detail)
        }
    }

    /// The signature of a wrong answer whose wrong elements no writer stores: what is wrong —
    /// elements never written — whatever oracle compared them and whatever shape the reported
    /// indices make (a record carries the ten lowest wrong indices of one comparison, which can
    /// show rows of one program as scattered), so programs of different computations that leave
    /// outputs unwritten share a bucket.
    fn unwritten_signature(&self) -> String {
        format!("{}/{}: {NEVER_WRITTEN}", self.stage.as_str(), self.class)
    }
}

/// The detail of a wrong answer whose wrong elements no writer stores (`run/mismatch: never
/// written`): the quantity is the verifier's `unwritten_elements`, from the same ownership walk.
pub const NEVER_WRITTEN: &str = "never written";

/// Error classes of the harness itself, not of the program: not failures to mine.
pub const HARNESS_CLASSES: &[&str] = &["no_gpu", "io", "internal", "workload", "shape", "driver_library", "arch", "cublas_unsupported", "build_N001"];

/// Seconds of GPU time charged to one timeout, per second of its limit.
pub const TIMEOUT_WEIGHT: f64 = 2.0;
/// The limit assumed for a timeout whose message does not say it.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// Set-up seconds charged to any failed GPU run (context, upload, module load).
pub const RUN_SETUP_S: f64 = 1.0;

fn timeout_seconds(message: &str) -> f64 {
    static AFTER: OnceLock<Regex> = OnceLock::new();
    re(&AFTER, r"after (\d+(?:\.\d+)?) ?s\b")
        .captures(message)
        .and_then(|c| c[1].parse().ok())
        .unwrap_or(DEFAULT_TIMEOUT_S)
}

fn byte_span_in(message: &str) -> Option<Span> {
    static BYTES: OnceLock<Regex> = OnceLock::new();
    let c = re(&BYTES, r"at bytes (\d+)\.\.(\d+)").captures(message)?;
    Some(Span { start: c[1].parse().ok()?, end: c[2].parse().ok()? })
}

fn run_observations(id: &str, r: &RunRecord, out: &mut Vec<Observation>) {
    let base = |stage: Stage, class: String, detail: String, message: String, cost: f64| Observation {
        evidence: id.to_string(),
        program: r.program.sha256.clone(),
        target: r.program.target.clone(),
        stage,
        class,
        detail,
        message,
        locus: Locus::None,
        cost,
        build_failure: false,
    };
    let measured_s = r.times_ms.as_ref().map_or(0.0, |t| t.samples_ms.iter().sum::<f64>() * (1.0 + f64::from(t.warmup) / f64::from(t.repeats.max(1))) / 1e3);
    match (r.verdict, &r.error) {
        (Verdict::Pass, _) => {
            if let (Some(p), Some(t)) = (&r.prediction, &r.times_ms) {
                let bin = ratio_bin(p.predicted_ms, t.median_ms);
                if !bin.contains("accurate") && t.median_ms > 0.0 {
                    let message = format!(
                        "predicted {:.4} ms ({} bound, calibration {:?}), measured {:.4} ms",
                        p.predicted_ms, p.bottleneck, p.calibration, t.median_ms
                    );
                    out.push(base(Stage::Run, "cost_model.misprediction".into(), format!("{bin}, {} bound", p.bottleneck), message, 0.0));
                }
            }
        }
        (Verdict::Skipped, _) => {}
        // The harness's own trouble (no GPU, a bad workload spec, I/O) says nothing about the program.
        (Verdict::Error, Some(e)) if HARNESS_CLASSES.contains(&e.class.as_str()) => {}
        (Verdict::Timeout, e) => {
            let msg = e.as_ref().map_or(String::new(), |e| e.message.clone());
            let cost = TIMEOUT_WEIGHT * timeout_seconds(&msg);
            out.push(base(Stage::Run, "timeout".into(), format!("hung at {}", normalize(&r.stage)), msg, cost));
        }
        (Verdict::Mismatch, _) => {
            // The comparison that saw the most elements gives the clearest pattern.
            let shape: Vec<u64> = r.tensors.iter().find(|t| t.role == "output").map(|t| t.shape.clone()).unwrap_or_default();
            let failed: Vec<_> = r.checks.iter().filter(|c| !c.passed).collect();
            let best = failed.iter().max_by_key(|c| (c.checked, std::cmp::Reverse(c.oracle.clone())));
            // Named by the workload's oracle, not by the comparison used (a cuBLAS comparison
            // exists only where cuBLAS does), so the signature does not depend on the machine.
            let named = |c: &str| r.workload.as_ref().map_or(c.to_string(), |w| w.oracle.clone());
            let (oracle, pattern, msg) = match best {
                Some(c) => {
                    let bad: Vec<Vec<u64>> = c.first_bad.iter().map(|b| b.index.clone()).collect();
                    (named(&c.oracle), mismatch_pattern(&shape, c.checked, c.mismatches, c.nonfinite, &bad), r.problem().unwrap_or_default())
                }
                None => (named("oracle"), "unknown".into(), r.problem().unwrap_or_default()),
            };
            out.push(base(Stage::Run, "mismatch".into(), format!("{oracle}: {pattern}"), msg, RUN_SETUP_S + measured_s));
        }
        (Verdict::Error, Some(e)) => {
            if e.class.starts_with("build_") {
                // A build failure: NVRTC / ptxas logs are split into their own failures.
                let events = parse_ptxas(&e.message);
                if !events.is_empty() && e.class.starts_with("build_N") {
                    for ev in events {
                        let mut o = base(ev.stage, ev.class.clone(), detail_of(&ev.message), ev.message.clone(), 0.0);
                        o.build_failure = true;
                        if let Some(s) = ev.span {
                            o.locus = Locus::Line(s);
                        }
                        out.push(o);
                    }
                } else {
                    let code = e.class.trim_start_matches("build_");
                    let stage = if code.starts_with('L') { Stage::Lower } else { Stage::Compile };
                    // `L002: shared memory needs …`: the code is already the class.
                    let detail = detail_of(&e.message);
                    let detail = detail.strip_prefix(&format!("{code}: ")).map_or(detail.clone(), str::to_string);
                    let mut o = base(stage, e.class.clone(), detail, e.message.clone(), 0.0);
                    o.build_failure = true;
                    if let Some(s) = byte_span_in(&e.message) {
                        o.locus = Locus::Bytes(s);
                    }
                    out.push(o);
                }
            } else {
                let cost = if e.class == "timeout" { TIMEOUT_WEIGHT * timeout_seconds(&e.message) } else { RUN_SETUP_S + measured_s };
                let detail = if e.class == "timeout" { format!("hung at {}", normalize(&r.stage)) } else { detail_of(&e.message) };
                out.push(base(Stage::Run, e.class.clone(), detail, e.message.clone(), cost));
            }
        }
        (Verdict::Error, None) => out.push(base(Stage::Run, "error".into(), String::new(), r.problem().unwrap_or_default(), RUN_SETUP_S)),
    }
    // Notable compile facts (deduplicated per program by the caller).
    if let Some(p) = &r.ptxas {
        let mut log = p.warnings.join("\n");
        if p.spills() > 0 {
            log.push_str(&format!(
                "\nptxas info    : Function properties for {}\n    {} bytes stack frame, {} bytes spill stores, {} bytes spill loads",
                p.function, p.stack_frame_bytes, p.spill_store_bytes, p.spill_load_bytes
            ));
        }
        for ev in parse_ptxas(&log) {
            let mut o = base(Stage::Compile, ev.class.clone(), detail_of(&ev.message), ev.message.clone(), 0.0);
            if let Some(s) = ev.span {
                o.locus = Locus::Line(s);
            }
            out.push(o);
        }
    }
}

fn failure_observation(id: &str, f: &FailureReport) -> Observation {
    let num = |k: &str| f.extra.get(k).and_then(serde_json::Value::as_f64);
    let is_timeout = f.error_class == "timeout" || f.error_class.ends_with(".timeout") || f.error_class == "hang";
    let detail = if let (Some(p), Some(m)) = (num("predicted_ms"), num("measured_ms")) {
        ratio_bin(p, m)
    } else if f.error_class == "mismatch" || f.error_class.starts_with("mismatch.") {
        let bad: Vec<Vec<u64>> = f
            .extra
            .get("bad_indices")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let shape: Vec<u64> = f.extra.get("output_shape").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default();
        let checked = num("checked").unwrap_or(0.0) as u64;
        let mism = num("mismatches").unwrap_or(bad.len() as f64) as u64;
        let nonf = num("nonfinite").unwrap_or(0.0) as u64;
        let oracle = f.extra.get("oracle").and_then(serde_json::Value::as_str).unwrap_or("oracle");
        format!("{oracle}: {}", mismatch_pattern(&shape, checked, mism, nonf, &bad))
    } else if is_timeout {
        "hung".into()
    } else {
        detail_of(&f.message)
    };
    let cost = f.gpu_seconds.unwrap_or(match (f.stage, is_timeout) {
        (Stage::Run, true) => DEFAULT_TIMEOUT_S,
        (Stage::Run, false) => RUN_SETUP_S,
        _ => 0.0,
    }) * if is_timeout { TIMEOUT_WEIGHT } else { 1.0 };
    Observation {
        evidence: id.to_string(),
        program: f.program.sha256.clone(),
        target: f.target.clone(),
        stage: f.stage,
        class: f.error_class.clone(),
        detail,
        message: f.message.clone(),
        locus: f.span.clone().map_or(Locus::None, Locus::Line),
        cost,
        build_failure: f.stage == Stage::Lower || (f.stage == Stage::Compile && !COMPILE_FACT_CLASSES.contains(&f.error_class.as_str()) && !f.error_class.starts_with("ptxas.warning")),
    }
}

/// ptxas classes that report facts of a build that succeeded (spills, an ignored `setmaxnreg`,
/// serialized wgmma), not a failed build: a rebuild passing says nothing about them.
const COMPILE_FACT_CLASSES: &[&str] = &["ptxas.spill", "ptxas.setmaxnreg_ignored", "ptxas.wgmma_serialized"];

/// Whether a run record is a build failure of the program (not of the harness: `build_N001`, no
/// NVRTC, says nothing about the program).
fn build_failure(r: &RunRecord) -> bool {
    r.error.as_ref().is_some_and(|e| e.class.starts_with("build_") && !HARNESS_CLASSES.contains(&e.class.as_str()))
}

/// Whether a run record got past the build (it built, and ran or was skipped).
fn built(r: &RunRecord) -> bool {
    !r.error.as_ref().is_some_and(|e| e.class.starts_with("build_"))
}

/// Ids of the build-failure run records superseded by a newer run record of the same program,
/// made by a different compiler, that got past the build (see the module docs).
pub fn superseded(records: &[Stored]) -> BTreeSet<String> {
    let mut by_program: BTreeMap<&str, Vec<(&str, &RunRecord)>> = BTreeMap::new();
    for s in records {
        if let Record::Run(r) = &s.record {
            by_program.entry(r.program.sha256.as_str()).or_default().push((s.id.as_str(), r));
        }
    }
    let mut out = BTreeSet::new();
    for runs in by_program.values() {
        for (id, old) in runs.iter().filter(|(_, r)| build_failure(r)) {
            if runs.iter().any(|(_, new)| new.created_unix_ms > old.created_unix_ms && new.cake != old.cake && built(new)) {
                out.insert((*id).to_string());
            }
        }
    }
    out
}

/// Every observation of a set of records, compile facts from run records once per program;
/// records in `skip` yield none.
fn observations(records: &[Stored], skip: &BTreeSet<String>) -> Vec<Observation> {
    let mut out = Vec::new();
    let mut seen_compile: BTreeSet<(String, String)> = BTreeSet::new();
    for s in records.iter().filter(|s| !skip.contains(s.id.as_str())) {
        match &s.record {
            Record::Run(r) => {
                let mut obs = Vec::new();
                run_observations(s.id.as_str(), r, &mut obs);
                for o in obs {
                    if o.stage != Stage::Run && !seen_compile.insert((o.program.clone(), o.signature())) {
                        continue;
                    }
                    out.push(o);
                }
            }
            Record::Failure(f) => out.push(failure_observation(s.id.as_str(), f)),
        }
    }
    out
}

/// One failure a record shows, as mining reads it: its signature, the tool's message and the
/// place the tool named (`cake-evolve-compiler evidence show`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordFailure {
    pub signature: String,
    pub message: String,
    /// The line the tool named (of the program, its generated CUDA or PTX).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<SpanRef>,
    /// The bytes of the program a lowering refusal names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Span>,
}

/// The failures mining reads from one record (none for a passing run), before attribution.
pub fn record_failures(s: &Stored) -> Vec<RecordFailure> {
    observations(std::slice::from_ref(s), &BTreeSet::new())
        .into_iter()
        .map(|o| {
            let (line, bytes) = match &o.locus {
                Locus::None => (None, None),
                Locus::Line(l) => (Some(l.clone()), None),
                Locus::Bytes(b) => (None, Some(*b)),
            };
            RecordFailure { signature: o.signature(), message: o.message, line, bytes }
        })
        .collect()
}

// ─── Attribution ─────────────────────────────────────────────────────────────────────────────────

/// What the miner knows about one program (computed once).
struct ProgramView {
    source: Option<String>,
    module: Option<Module>,
    facts: Option<ModuleFacts>,
    /// Error codes of the current verifier (and type checker) on the program.
    rejected_by: Vec<String>,
    /// Non-blocking findings' (code, primary span).
    soft_findings: Vec<(String, Span)>,
    /// CUDA line → span, when the program lowers.
    span_map: Option<Vec<(u32, Span)>>,
    lowered_tried: bool,
}

impl ProgramView {
    fn new(store: &EvidenceStore, sha: &str, warnings: &mut Vec<String>, fe: &Frontend) -> ProgramView {
        let source = match store.program(sha) {
            Ok(s) => s,
            Err(e) => {
                warnings.push(format!("warning[{}]: {}: {}", e.code, e.path.display(), e.message));
                None
            }
        };
        let mut v = ProgramView { source, module: None, facts: None, rejected_by: Vec::new(), soft_findings: Vec::new(), span_map: None, lowered_tried: false };
        if let Some(src) = &v.source {
            // The verifier of the checkout being evolved (its rules, catalog and targets), so a
            // bucket that an accepted rule or an ablation changed is judged by that rule set.
            let out = fe.check(src);
            let mut codes: Vec<String> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.clone()).collect();
            codes.sort();
            codes.dedup();
            v.rejected_by = codes;
            v.soft_findings = out
                .diagnostics
                .iter()
                .filter(|d| matches!(d.severity, Severity::Warning | Severity::CoverageLimit))
                .map(|d| (d.code.clone(), d.primary.span))
                .collect();
            if let Some(m) = out.module {
                if let Some(t) = cake::target::TargetTable::builtin().get(&m.target) {
                    v.facts = Some(cake::verify::module_facts(&m, t));
                }
                v.module = Some(m);
            }
        }
        v
    }

    fn span_map(&mut self) -> Option<&Vec<(u32, Span)>> {
        if !self.lowered_tried {
            self.lowered_tried = true;
            if let (Some(m), Some(src)) = (&self.module, &self.source) {
                let v = cake::verify::Validated::assume_verified_unsafe(m.clone());
                let opts = cake::lower::LowerOptions::with_source("program.cake", src);
                // Lowering is not expected to panic, but a broken program must not stop mining.
                let lowered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cake::lower::lower_with(&v, &opts)));
                if let Ok(Ok(l)) = lowered {
                    self.span_map = Some(l.span_map);
                }
            }
        }
        self.span_map.as_ref()
    }

    /// The byte range of a 1-based line (and column).
    fn line_span(&self, line: u32, col: Option<u32>) -> Option<Span> {
        let src = self.source.as_ref()?;
        let mut start = 0usize;
        for (i, l) in src.split_inclusive('\n').enumerate() {
            if i + 1 == line as usize {
                let end = start + l.trim_end_matches('\n').len();
                if let Some(c) = col {
                    let off = l.char_indices().nth(c.saturating_sub(1) as usize).map_or(end, |(b, _)| start + b);
                    return Some(Span::new(off, (off + 1).min(end.max(off + 1))));
                }
                return Some(Span::new(start, end));
            }
            start += l.len();
        }
        None
    }

    /// The construct a position is about (never the kernel, never a call argument):
    /// * a whole line: the outermost construct that starts on it (the statement or declaration
    ///   written there, not a call nested in it), else the smallest one containing the line;
    /// * a span (a column, a byte range, a statement from the span map): the smallest construct
    ///   containing it — none for a span larger than any construct (a `for` loop), which is then
    ///   attributed by its class instead.
    fn construct_at(&self, span: Span, whole_line: bool) -> Option<(String, String)> {
        let facts = self.facts.as_ref()?;
        let cands = || facts.constructs.iter().filter(|c| !matches!(c.kind, ConstructKind::Kernel | ConstructKind::Arg));
        let contains = |d: Span| d.start <= span.start && span.end <= d.end;
        let starting = if whole_line {
            cands().filter(|c| span.start <= c.decl.start && c.decl.start < span.end.max(span.start + 1)).max_by_key(|c| (c.decl.len(), std::cmp::Reverse(c.decl.start)))
        } else {
            None
        };
        let found = starting.or_else(|| cands().filter(|c| contains(c.decl)).min_by_key(|c| (c.decl.len(), c.kind != ConstructKind::Call, c.decl.start)));
        found.map(|c| (c.kind.as_str().to_string(), if c.kind == ConstructKind::Call { c.op.clone().unwrap_or_default() } else { String::new() }))
    }

    /// The op of the call whose argument spans exactly `span`.
    fn argument_at(&self, span: Span) -> Option<String> {
        let facts = self.facts.as_ref()?;
        facts.constructs.iter().find(|c| c.kind == ConstructKind::Arg && c.decl == span).and_then(|c| c.op.clone())
    }

    /// The kind of the first declaration (tensor, shared region, view, role, pipeline,
    /// barrier) whose name the message quotes in backticks.
    fn named_declaration(&self, message: &str) -> Option<String> {
        let facts = self.facts.as_ref()?;
        let kinds = [ConstructKind::Tensor, ConstructKind::Smem, ConstructKind::View, ConstructKind::Role, ConstructKind::Pipeline, ConstructKind::Barrier];
        message.split('`').skip(1).step_by(2).find_map(|name| {
            facts.constructs.iter().find(|c| kinds.contains(&c.kind) && c.get("name") == Some(&cake::pred::Value::Sym(name.to_string()))).map(|c| c.kind.as_str().to_string())
        })
    }

    fn has_call(&self, op: &str) -> bool {
        self.facts.as_ref().is_some_and(|f| f.constructs.iter().any(|c| c.kind == ConstructKind::Call && c.op.as_deref() == Some(op)))
    }

    fn has_kind(&self, kind: ConstructKind) -> bool {
        self.facts.as_ref().is_some_and(|f| f.constructs.iter().any(|c| c.kind == kind))
    }
}

/// What a failure class implicates when nothing points at a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Implicated {
    Sync,
    AsyncCopy,
    SharedMemory,
    Registers,
    Wgmma,
    Unknown,
}

fn implicated(stage: Stage, class: &str) -> Implicated {
    let c = class.to_ascii_lowercase();
    if c == "timeout" || c == "hang" || c.ends_with(".timeout") || c.starts_with("synccheck.") || c.starts_with("racecheck.") || c == "cuda_error_launch_timeout" {
        Implicated::Sync
    } else if c.contains("shared_data") || c.contains("smem") || c == "build_l002" {
        Implicated::SharedMemory
    } else if c.contains("spill") || c.contains("setmaxnreg") || c.contains("local_data") || c == "build_l003" || c == "cuda_error_launch_out_of_resources" {
        Implicated::Registers
    } else if c.contains("wgmma") {
        Implicated::Wgmma
    } else if c.starts_with("memcheck.")
        || c.starts_with("tma_")
        || c == "build_l005"
        || c == "build_l006"
        || matches!(c.as_str(), "cuda_error_illegal_address" | "cuda_error_misaligned_address" | "cuda_error_illegal_instruction" | "cuda_error_hardware_stack_error")
        || (stage == Stage::Run && c.starts_with("sanitizer."))
    {
        Implicated::AsyncCopy
    } else {
        Implicated::Unknown
    }
}

/// (construct kind, op, how it was found) for one observation.
fn attribute(o: &Observation, view: &mut ProgramView) -> (String, String, String) {
    // 1. A position.
    let span = match &o.locus {
        Locus::Bytes(s) => Some((*s, false)),
        Locus::Line(s) => match s.kind {
            SpanKind::Cake => view.line_span(s.line, s.col).map(|sp| (sp, s.col.is_none())),
            SpanKind::Cuda => view.span_map().and_then(|m| m.iter().find(|(l, _)| *l == s.line).map(|(_, sp)| (*sp, false))),
            SpanKind::Ptx => None,
        },
        Locus::None => None,
    };
    // A lowering refusal's byte span that is exactly one call argument is about that operand
    // (`a K-major wgmma operand whose rows ...`): the operand's facts (its region's rows and
    // swizzle) say what the call's do not.
    if let Some((s, false)) = span.filter(|_| o.stage == Stage::Lower && matches!(o.locus, Locus::Bytes(_))) {
        if let Some(op) = view.argument_at(s) {
            return ("arg".into(), op, "span".into());
        }
    }
    if let Some((k, op)) = span.and_then(|(s, line)| view.construct_at(s, line)) {
        return (k, op, "span".into());
    }
    // 2. A declaration the message names (`tensor map of `Y`: the inner box row is 24 B ...`):
    //    the failure says what it is about, so the rule is searched over that declaration's facts.
    if let Some(k) = view.named_declaration(&o.message) {
        return (k, String::new(), "named".into());
    }
    // 3. The constructs the class implicates.
    let pick = |view: &ProgramView, ops: &[&str]| ops.iter().find(|op| view.has_call(op)).map(|op| ("call".to_string(), op.to_string(), "facts".to_string()));
    let by_facts = match implicated(o.stage, &o.class) {
        Implicated::Sync => pick(view, &["arrive_expect_tx", "wait_parity", "arrive"]).or_else(|| {
            if view.has_kind(ConstructKind::Pipeline) {
                Some(("pipeline".into(), String::new(), "facts".into()))
            } else if view.has_kind(ConstructKind::Barrier) {
                Some(("barrier".into(), String::new(), "facts".into()))
            } else {
                None
            }
        }),
        Implicated::AsyncCopy => pick(view, &["tma_load", "tma_store", "cp_async"]),
        Implicated::SharedMemory => view.has_kind(ConstructKind::Smem).then(|| ("smem".into(), String::new(), "facts".into())),
        Implicated::Registers => view.has_kind(ConstructKind::Role).then(|| ("role".into(), String::new(), "facts".into())),
        Implicated::Wgmma => pick(view, &["wgmma"]),
        Implicated::Unknown => None,
    };
    if let Some(a) = by_facts {
        return a;
    }
    // 4. What the verifier could not decide.
    let soft = view.soft_findings.clone();
    for (code, s) in soft {
        if let Some((k, op)) = view.construct_at(s, false) {
            return (k, op, format!("finding:{code}"));
        }
    }
    ("kernel".into(), String::new(), "none".into())
}

// ─── Buckets ─────────────────────────────────────────────────────────────────────────────────────

/// What the current verifier says about a bucket's programs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifierStatus {
    /// Programs of the bucket the verifier (or type checker) rejects today.
    pub rejected: usize,
    /// The error codes it rejects them with (sorted, unique).
    pub codes: Vec<String>,
    /// Programs whose source is not in the store (not re-checked).
    pub unknown: usize,
}

/// A recurring failure: one signature on one kind of construct.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// First 12 hex digits of SHA-256(`signature \n construct_kind \n op`).
    pub id: String,
    /// `stage/class: detail`.
    pub signature: String,
    pub stage: Stage,
    pub class: String,
    /// `call`, `smem`, `view`, `pipeline`, `barrier`, `role`, `tensor`, `grid` or `kernel`.
    pub construct_kind: String,
    /// The op for a `call` construct (`tma_load`, `arrive_expect_tx`), empty otherwise.
    pub op: String,
    /// How the construct was found (`span`, `facts`, `finding:<code>`, `none`), sorted.
    pub attribution: Vec<String>,
    /// Ids of the records (sorted).
    pub evidence_ids: Vec<String>,
    /// SHA-256 of each distinct program (sorted): the recurrence.
    pub program_hashes: Vec<String>,
    /// Observations (a program may fail the same way at several shapes).
    pub count: usize,
    /// GPU seconds lost (see the module docs).
    pub cost: f64,
    pub score: f64,
    pub targets: Vec<String>,
    pub verifier: VerifierStatus,
    /// Programs whose recorded build failure the current compiler no longer reproduces: they
    /// lower and compile now (`stale.rs`, warning `M003`). A bucket whose programs are all stale
    /// proposes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_programs: Vec<String>,
    /// One message as the tool printed it (from the first evidence id).
    pub example: String,
}

impl Bucket {
    /// Whether every program of the bucket now builds: the failure no longer reproduces.
    pub fn is_stale(&self) -> bool {
        !self.program_hashes.is_empty() && self.stale_programs.len() == self.program_hashes.len()
    }
}

/// Everything mining produced, with the problems it met.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MineReport {
    pub buckets: Vec<Bucket>,
    /// Records read.
    pub records: usize,
    /// Failures observed in them.
    pub observations: usize,
    /// Coded warnings: unreadable or corrupt records (skipped), programs missing from the store.
    pub warnings: Vec<String>,
}

/// The bucket id of a key.
pub fn bucket_id(signature: &str, construct_kind: &str, op: &str) -> String {
    sha256_hex(format!("{signature}\n{construct_kind}\n{op}").as_bytes())[..12].to_string()
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Mine already-read records (the store is needed for program sources).
pub fn mine_records(store: &EvidenceStore, records: &[Stored], warnings: Vec<String>) -> MineReport {
    mine_records_with(store, records, warnings, &Frontend::default())
}

/// [`mine_records`] judging each program with the given front end.
pub fn mine_records_with(store: &EvidenceStore, records: &[Stored], mut warnings: Vec<String>, fe: &Frontend) -> MineReport {
    let stale = superseded(records);
    if !stale.is_empty() {
        warnings.push(format!(
            "warning[M002]: {} record(s) superseded by newer runs of the same program: build failures of an older compiler that a newer one built past, left out of the buckets",
            stale.len()
        ));
    }
    let obs = observations(records, &stale);
    let mut views: HashMap<String, ProgramView> = HashMap::new();
    struct Acc {
        stage: Stage,
        class: String,
        attribution: BTreeSet<String>,
        evidence: BTreeSet<String>,
        programs: BTreeSet<String>,
        targets: BTreeSet<String>,
        count: usize,
        cost: f64,
        example: (String, String),
        build_failure: bool,
    }
    let mut acc: BTreeMap<(String, String, String), Acc> = BTreeMap::new();
    for o in &obs {
        let view = views.entry(o.program.clone()).or_insert_with(|| ProgramView::new(store, &o.program, &mut warnings, fe));
        let (mut kind, mut op, mut how) = attribute(o, view);
        let mut signature = o.signature();
        if how == "none" && o.class == "mismatch" {
            // A wrong answer nothing else placed: who owns the elements nobody wrote (attribute.rs);
            // bucketed by what is wrong (never written) on that owner, across oracles.
            let run = records.iter().find(|r| r.id.to_string() == o.evidence).and_then(|r| match &r.record { Record::Run(r) => Some(r), _ => None });
            if let Some(owner) = run.zip(view.module.as_ref()).and_then(|(r, m)| crate::attribute::mismatch_owner(r, m, view.facts.as_ref())) {
                (kind, op, how) = owner;
                signature = o.unwritten_signature();
            }
        }
        let a = acc.entry((signature, kind, op)).or_insert_with(|| Acc {
            stage: o.stage,
            class: o.class.clone(),
            attribution: BTreeSet::new(),
            evidence: BTreeSet::new(),
            programs: BTreeSet::new(),
            targets: BTreeSet::new(),
            count: 0,
            cost: 0.0,
            example: (o.evidence.clone(), o.message.clone()),
            build_failure: o.build_failure,
        });
        a.attribution.insert(how);
        a.evidence.insert(o.evidence.clone());
        a.programs.insert(o.program.clone());
        a.targets.insert(o.target.clone());
        a.count += 1;
        a.cost += o.cost;
        if o.evidence < a.example.0 {
            a.example = (o.evidence.clone(), o.message.clone());
        }
    }
    // Recorded build failures are built again with the current compiler (once per program).
    let mut rechecks: BTreeMap<String, Recheck> = BTreeMap::new();
    for a in acc.values().filter(|a| a.build_failure) {
        for p in &a.programs {
            if let (false, Some(src)) = (rechecks.contains_key(p), views.get(p).and_then(|v| v.source.as_deref())) {
                rechecks.insert(p.clone(), crate::stale::recheck(src, fe));
            }
        }
    }
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let mut buckets: Vec<Bucket> = acc
        .into_iter()
        .map(|((signature, kind, op), a)| {
            let mut verifier = VerifierStatus::default();
            let mut codes = BTreeSet::new();
            for p in &a.programs {
                match views.get(p) {
                    Some(v) if v.source.is_some() => {
                        if !v.rejected_by.is_empty() {
                            verifier.rejected += 1;
                            codes.extend(v.rejected_by.iter().cloned());
                        }
                    }
                    _ => {
                        verifier.unknown += 1;
                        missing.insert(p.clone());
                    }
                }
            }
            verifier.codes = codes.into_iter().collect();
            let programs = a.programs.len();
            let cost = round3(a.cost);
            let score = round3(programs as f64 * (1.0 + (1.0 + cost).log2()));
            let example = a.example.1.lines().take(3).collect::<Vec<_>>().join("\n");
            let stale_programs = if a.build_failure { a.programs.iter().filter(|p| rechecks.get(*p) == Some(&Recheck::Builds)).cloned().collect() } else { Vec::new() };
            Bucket {
                id: bucket_id(&signature, &kind, &op),
                signature,
                stage: a.stage,
                class: a.class,
                construct_kind: kind,
                op,
                attribution: a.attribution.into_iter().collect(),
                evidence_ids: a.evidence.into_iter().collect(),
                program_hashes: a.programs.into_iter().collect(),
                count: a.count,
                cost,
                score,
                targets: a.targets.into_iter().collect(),
                verifier,
                stale_programs,
                example,
            }
        })
        .collect();
    let short = |ps: &[&String]| ps.iter().map(|p| p.chars().take(12).collect::<String>()).collect::<Vec<_>>().join(", ");
    let stale: Vec<&String> = rechecks.iter().filter(|(_, r)| **r == Recheck::Builds).map(|(p, _)| p).collect();
    if !stale.is_empty() {
        let records: BTreeSet<&String> = obs.iter().filter(|o| o.build_failure && stale.contains(&&o.program)).map(|o| &o.evidence).collect();
        warnings.push(format!(
            "warning[M003]: {} build failure record(s) of {} program(s) no longer reproduce: the current compiler lowers and compiles them ({}); their buckets propose nothing for them",
            records.len(),
            stale.len(),
            short(&stale)
        ));
    }
    let unknown: Vec<(&String, &String)> = rechecks.iter().filter_map(|(p, r)| if let Recheck::Unknown(why) = r { Some((p, why)) } else { None }).collect();
    if let Some((_, why)) = unknown.first() {
        let ps: Vec<&String> = unknown.iter().map(|(p, _)| *p).collect();
        warnings.push(format!(
            "note[M004]: could not re-check the recorded build failures of {} program(s) ({}): {why}; they are mined as recorded (set up the CUDA toolchain to tell stale evidence apart)",
            ps.len(),
            short(&ps)
        ));
    }
    buckets.sort_by(|x, y| {
        y.score
            .total_cmp(&x.score)
            .then(y.program_hashes.len().cmp(&x.program_hashes.len()))
            .then(y.cost.total_cmp(&x.cost))
            .then(x.id.cmp(&y.id))
    });
    for p in missing {
        warnings.push(format!("warning[M001]: program {p} is not in the store's programs/: its failures are bucketed without attribution or re-verification"));
    }
    MineReport { buckets, records: records.len(), observations: obs.len(), warnings }
}

/// Mine the whole store: the report with its warnings.
pub fn mine_report(store: &EvidenceStore) -> MineReport {
    mine_report_with(store, &Frontend::default())
}

/// [`mine_report`] judging each program with the given front end (a checkout's rules).
pub fn mine_report_with(store: &EvidenceStore, fe: &Frontend) -> MineReport {
    let scan = store.scan();
    let warnings = scan.problems.iter().map(store_warning).collect();
    mine_records_with(store, &scan.records, warnings, fe)
}

fn store_warning(e: &StoreError) -> String {
    format!("warning[{}]: {}: {}", e.code, e.path.display(), e.message)
}

/// Mine the store into ranked buckets. Unreadable or corrupt records are skipped with a coded
/// warning on standard error (see [`mine_report`] to get them instead).
pub fn mine(store: &EvidenceStore) -> Vec<Bucket> {
    let report = mine_report(store);
    for w in &report.warnings {
        eprintln!("{}", crate::sanitize::line(w));
    }
    report.buckets
}

// ─── Output ──────────────────────────────────────────────────────────────────────────────────────

/// The buckets as a table for people.
pub fn render_table(report: &MineReport) -> String {
    let mut rows: Vec<[String; 8]> = vec![[
        "rank".into(),
        "bucket".into(),
        "progs".into(),
        "count".into(),
        "cost_s".into(),
        "score".into(),
        "caught".into(),
        "construct".into(),
    ]];
    for (i, b) in report.buckets.iter().enumerate() {
        let construct = if b.op.is_empty() { b.construct_kind.clone() } else { format!("{}:{}", b.construct_kind, b.op) };
        rows.push([
            (i + 1).to_string(),
            b.id.clone(),
            b.program_hashes.len().to_string(),
            b.count.to_string(),
            format!("{:.1}", b.cost),
            format!("{:.2}", b.score),
            format!("{}/{}", b.verifier.rejected, b.program_hashes.len()),
            crate::sanitize::line_bounded(&construct, 80),
        ]);
    }
    let widths: Vec<usize> = (0..8).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        for (c, cell) in r.iter().enumerate() {
            out.push_str(&format!("{cell:<w$}  ", w = widths[c]));
        }
        // Signatures are failure-report text: escaped, so a crafted one cannot drive the terminal.
        out.push_str(&if i == 0 { "signature".to_string() } else { crate::sanitize::line(&report.buckets[i - 1].signature) });
        out.push('\n');
    }
    out.push_str(&format!(
        "{} bucket(s) from {} failure(s) in {} record(s); `caught` = programs the current verifier rejects\n",
        report.buckets.len(),
        report.observations,
        report.records
    ));
    out
}

/// `cake-evolve-compiler mine [--store DIR] [--message-format human|json]`.
#[derive(clap::Args, Debug, Clone)]
pub struct MineArgs {
    /// The evidence store.
    #[arg(long, value_name = "DIR", default_value = crate::store::DEFAULT_STORE_DIR)]
    pub store: std::path::PathBuf,
    /// Show only the first N buckets.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
}

/// Run `mine`, printing a table (`human`) or the whole report (`json`: buckets, counts,
/// warnings); the exit status (0, or 2 when the store cannot be opened).
pub fn run_mine(args: MineArgs, format: Format) -> u8 {
    let store = match EvidenceStore::open_existing(&args.store) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    // `caught` is judged by the compiler data of the checkout `mine` runs in (what `propose`
    // there would judge with), else by the built-in rules.
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let mut report = match cake::rule_source::find_checkout(&cwd) {
        Some(root) => match cake_merge_gates::corpus_gate::frontend_for(&cake_merge_gates::Tree::new(&root)) {
            Ok(fe) => {
                eprintln!("note: `caught` judged with the compiler data of checkout {}", root.display());
                mine_report_with(&store, &fe)
            }
            Err(e) => {
                eprintln!("error: the checkout's compiler data at {} does not load: {e}", root.display());
                return 2;
            }
        },
        None => mine_report(&store),
    };
    if let Some(n) = args.top {
        report.buckets.truncate(n);
    }
    for w in &report.warnings {
        eprintln!("{}", crate::sanitize::line(w));
    }
    for b in report.buckets.iter().filter(|b| !crate::sanitize::is_clean_line(&b.signature)) {
        eprintln!("note[Q009]: bucket {}: its failure text holds control characters; they are shown escaped (\\x1b) and are escaped the same way in the rules, records and commits `propose` makes of it", b.id);
    }
    let text = match format {
        Format::Human => render_table(&report),
        Format::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    0
}
