//! Run records: one JSON file per run, content-addressed (the file name is the SHA-256 of the
//! file's bytes), append-only (an existing record is never rewritten), in `<evidence>/runs/`.
//! The format is documented in `README.md` beside this file; naming, layout and writing are the
//! store's (`crate::store`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::RunError;
use super::gpu::GpuInfo;
use super::job::{JobResult, LaunchFacts, TensorFacts, Times, Verdict};
use super::oracle::CheckReport;
use super::workload::Shape;
use crate::nvrtc::PtxasReport;

pub const RECORD_SCHEMA: &str = "cake.run-record/1";

/// Default evidence root (records go to `<root>/runs/`).
pub use crate::store::DEFAULT_ROOT as DEFAULT_EVIDENCE_DIR;
pub use crate::store::sha256_hex;
use crate::store::BlobError;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramInfo {
    /// `kernel NAME`.
    pub name: String,
    pub path: String,
    /// SHA-256 of the canonical source (`cake fmt` output), so layout and comments do not
    /// change the identity of a program.
    pub sha256: String,
    pub target: String,
    /// The verifier was bypassed (`--unsafe-skip-verify`).
    pub unverified: bool,
    /// Codes of the verifier's non-blocking findings (or, unverified, of the findings it would
    /// have reported).
    pub findings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit: Option<String>,
}

impl ToolInfo {
    /// This binary's version, and the commit from `CAKE_GIT_COMMIT` or, failing that, `git`
    /// in the source tree it was built from (when that still exists).
    pub fn current() -> ToolInfo {
        static INFO: std::sync::OnceLock<ToolInfo> = std::sync::OnceLock::new();
        INFO.get_or_init(Self::probe).clone()
    }

    fn probe() -> ToolInfo {
        let commit = std::env::var("CAKE_GIT_COMMIT").ok().filter(|s| !s.trim().is_empty()).or_else(|| {
            let out = std::process::Command::new("git")
                .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
                .stderr(std::process::Stdio::null())
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
                .filter(|s| s.len() == 40)
        });
        ToolInfo { version: env!("CARGO_PKG_VERSION").to_string(), git_commit: commit.map(|s| s.trim().to_string()) }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    pub path: String,
    pub sha256: String,
    pub oracle: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineReport {
    pub name: String,
    pub times_ms: Times,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// Kernel speed over baseline speed = baseline median time / kernel median time
    /// (1.0: as fast as the baseline; 0.8: 80 % of its throughput); when the two were timed in
    /// interleaved rounds, the median of the baseline's round medians over the kernel's.
    pub speed_ratio: f64,
    /// The interleaved rounds the ratio was taken over (`runtime::rounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<crate::runtime::rounds::Rounds>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub created_unix_ms: u64,
    /// `run` or `bench`.
    pub command: String,
    pub program: ProgramInfo,
    pub cake: ToolInfo,
    /// The architecture the cubin was built for (`sm_90a`; a program for an older target runs
    /// as the device's own architecture, e.g. `sm_90`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_arch: Option<String>,
    pub gpu: Option<GpuInfo>,
    pub workload: Option<WorkloadInfo>,
    pub shape: Shape,
    /// The distribution that overrode every input (`--dist`), or `per-input`.
    pub dist: String,
    pub seed: u64,
    pub verdict: Verdict,
    pub error: Option<RunError>,
    /// The last stage reached (where an error or hang happened).
    pub stage: String,
    pub tensors: Vec<TensorFacts>,
    pub checks: Vec<CheckReport>,
    pub times_ms: Option<Times>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    pub baseline: Option<BaselineReport>,
    pub launch: Option<LaunchFacts>,
    pub ptxas: Option<PtxasReport>,
    /// What the cost model predicted for this program and shape, when its target is calibrated.
    /// Beside `times_ms` it is evidence for recalibration: the evolution engine mines
    /// predicted/measured ratios from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Prediction>,
    pub notes: Vec<String>,
}

/// The cost model's estimate recorded with a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub predicted_ms: f64,
    /// `tensor-core`, `memory`, `epilogue` or `latency/sync`.
    pub bottleneck: String,
    /// `fitted_on` of the calibration used ("" for initial values never fitted).
    pub calibration: String,
}

impl RunRecord {
    /// Fill the run-specific parts from a child's result.
    #[allow(clippy::too_many_arguments)]
    pub fn from_result(
        command: &str,
        program: ProgramInfo,
        run_arch: Option<String>,
        workload: Option<WorkloadInfo>,
        shape: Shape,
        dist: String,
        seed: u64,
        flops: Option<f64>,
        ptxas: Option<PtxasReport>,
        r: JobResult,
        probe: Option<&GpuInfo>,
    ) -> RunRecord {
        let tflops = |t: &Times| flops.filter(|_| t.median_ms > 0.0).map(|f| f / (t.median_ms * 1e-3) / 1e12);
        let baseline = r.baseline.as_ref().map(|b| BaselineReport {
            name: b.name.clone(),
            tflops: tflops(&b.times),
            speed_ratio: b.rounds.as_ref().map(|r| r.speed_ratio).unwrap_or_else(|| {
                r.times.as_ref().map_or(0.0, |t| if t.median_ms > 0.0 { b.times.median_ms / t.median_ms } else { 0.0 })
            }),
            rounds: b.rounds.clone(),
            times_ms: b.times.clone(),
        });
        RunRecord {
            schema: RECORD_SCHEMA.into(),
            created_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            command: command.into(),
            program,
            cake: ToolInfo::current(),
            run_arch,
            gpu: r.gpu.clone().or_else(|| probe.cloned()),
            workload,
            shape,
            dist,
            seed,
            verdict: r.verdict,
            error: r.error.clone(),
            stage: r.stage.clone(),
            tensors: r.tensors.clone(),
            checks: r.checks.clone(),
            tflops: r.times.as_ref().and_then(tflops),
            times_ms: r.times.clone(),
            flops,
            baseline,
            launch: r.launch.clone(),
            ptxas,
            prediction: None,
            notes: r.notes.clone(),
        }
    }

    /// A one-line summary of why it did not pass.
    pub fn problem(&self) -> Option<String> {
        if let Some(e) = &self.error {
            let first = e.message.lines().next().unwrap_or("");
            return Some(format!("[{}] {first}", e.class));
        }
        self.checks.iter().find(|c| !c.passed).map(|c| {
            let first = c
                .first_bad
                .first()
                .map_or(String::new(), |b| format!(" first at {:?}: got {} want {}", b.index, b.got, b.want));
            format!("{}: {} of {} wrong, {} non-finite;{first}", c.oracle, c.mismatches, c.checked, c.nonfinite)
        })
    }
}

/// Where records of an evidence root live.
pub fn runs_dir(evidence: &Path) -> PathBuf {
    evidence.join(crate::store::RUNS_DIR)
}

/// A run record's canonical bytes (pretty JSON and a newline): its content address is their
/// SHA-256, whoever writes it.
pub fn canonical_bytes(rec: &RunRecord) -> Vec<u8> {
    // A struct of strings, numbers and maps with string keys always serializes.
    (serde_json::to_string_pretty(rec).unwrap_or_default() + "\n").into_bytes()
}

/// Write `rec` as `<evidence>/runs/<sha256>.json`. Returns the path and whether a new file was
/// created (an identical record already there is left as it is; nothing is ever overwritten).
pub fn write_record(evidence: &Path, rec: &RunRecord) -> Result<(PathBuf, bool), BlobError> {
    crate::store::put(&runs_dir(evidence), &canonical_bytes(rec), "json")
}

/// Read every record of an evidence root (for tests and tools), sorted by creation time.
pub fn read_records(evidence: &Path) -> std::io::Result<Vec<(PathBuf, RunRecord)>> {
    let mut out = Vec::new();
    let dir = runs_dir(evidence);
    if !dir.exists() {
        return Ok(out);
    }
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p)?;
            let rec: RunRecord = serde_json::from_str(&text).map_err(std::io::Error::other)?;
            out.push((p, rec));
        }
    }
    out.sort_by_key(|(_, r)| r.created_unix_ms);
    Ok(out)
}

/// Verdict counts, for summaries.
pub fn tally(records: &[RunRecord]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for r in records {
        *m.entry(r.verdict.name()).or_insert(0) += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::job::{BaselineResult, JobResult, Times, Verdict};
    use crate::runtime::rounds::Rounds;

    fn record(r: JobResult) -> RunRecord {
        let program = ProgramInfo { name: "k".into(), path: "k.cake".into(), sha256: "0".repeat(64), target: "sm_90a".into(), unverified: false, findings: Vec::new() };
        RunRecord::from_result("bench", program, None, None, Shape::new(), "normal".into(), 1, None, None, r, None)
    }

    #[test]
    fn the_speed_ratio_is_the_rounds_when_the_peer_was_timed_in_rounds() {
        let times = |v: Vec<f64>| Times::from_samples(v, 0, 0).unwrap();
        let mut r = JobResult::empty();
        r.verdict = Verdict::Pass;
        // Pooled, the kernel's median is 1.0 and the peer's 2.1; the rounds say 2.0.
        r.times = Some(times(vec![1.0, 1.0, 1.0, 0.9, 1.1, 1.0]));
        let rounds = Rounds::from_samples(&[vec![1.0, 1.0], vec![1.0, 0.9], vec![1.1, 1.0]], &[vec![2.0, 2.0], vec![2.6, 2.6], vec![2.0, 2.1]]).unwrap();
        r.baseline = Some(BaselineResult { name: "cublas".into(), times: times(vec![2.0, 2.0, 2.6, 2.6, 2.0, 2.1]), rounds: Some(rounds.clone()) });
        let rec = record(r.clone());
        let b = rec.baseline.unwrap();
        assert!((b.speed_ratio - rounds.speed_ratio).abs() < 1e-12, "{b:?}");
        assert_eq!(b.rounds, Some(rounds));
        // Without rounds (an older child): the pooled medians.
        r.baseline.as_mut().unwrap().rounds = None;
        let b = record(r).baseline.unwrap();
        assert!((b.speed_ratio - 2.05).abs() < 1e-9, "{b:?}");
        assert!(b.rounds.is_none());
    }
}
