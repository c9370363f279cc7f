//! Run records: one JSON file per run, content-addressed (the file name is the SHA-256 of the
//! file's bytes), append-only (an existing record is never rewritten), in `<evidence>/runs/`.
//! The format is documented in `README.md` beside this file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::RunError;
use super::gpu::GpuInfo;
use super::job::{JobResult, LaunchFacts, TensorFacts, Times, Verdict};
use super::oracle::CheckReport;
use super::workload::Shape;
use crate::nvrtc::PtxasReport;

pub const RECORD_SCHEMA: &str = "cake.run-record/1";

/// Default evidence root (records go to `<root>/runs/`).
pub const DEFAULT_EVIDENCE_DIR: &str = ".cake/evidence";

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

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
    /// (1.0: as fast as the baseline; 0.8: 80 % of its throughput).
    pub speed_ratio: f64,
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
            speed_ratio: r.times.as_ref().map_or(0.0, |t| {
                if t.median_ms > 0.0 {
                    b.times.median_ms / t.median_ms
                } else {
                    0.0
                }
            }),
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
    evidence.join("runs")
}

/// Write `rec` as `<evidence>/runs/<sha256>.json`. Returns the path and whether a new file was
/// created (an identical record already there is left as it is; nothing is ever overwritten).
pub fn write_record(evidence: &Path, rec: &RunRecord) -> std::io::Result<(PathBuf, bool)> {
    let text = serde_json::to_string_pretty(rec).map_err(std::io::Error::other)? + "\n";
    write_content_addressed(&runs_dir(evidence), text.as_bytes())
}

/// Store `bytes` as `<dir>/<sha256(bytes)>.json` without ever replacing an existing file.
pub fn write_content_addressed(dir: &Path, bytes: &[u8]) -> std::io::Result<(PathBuf, bool)> {
    std::fs::create_dir_all(dir)?;
    let hash = sha256_hex(bytes);
    let path = dir.join(format!("{hash}.json"));
    if path.exists() {
        return Ok((path, false));
    }
    let tmp = dir.join(format!(".{hash}.{}.tmp", std::process::id()));
    {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    // A hard link fails if the name exists: no window where a record could be replaced.
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok((path, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok((path, false)),
        Err(e) => Err(e),
    }
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

    #[test]
    fn sha256_matches_known_vectors() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn content_addressed_writes_never_replace() {
        let dir = super::super::isolate::work_dir().unwrap();
        let (p1, new1) = write_content_addressed(&dir, b"{\"a\": 1}\n").unwrap();
        assert!(new1);
        assert_eq!(p1.file_name().unwrap().to_str().unwrap(), format!("{}.json", sha256_hex(b"{\"a\": 1}\n")));
        let (p2, new2) = write_content_addressed(&dir, b"{\"a\": 1}\n").unwrap();
        assert_eq!(p1, p2);
        assert!(!new2);
        // Even a corrupted file under that name is left alone (append-only evidence).
        std::fs::write(&p1, b"tampered").unwrap();
        let (_, new3) = write_content_addressed(&dir, b"{\"a\": 1}\n").unwrap();
        assert!(!new3);
        assert_eq!(std::fs::read(&p1).unwrap(), b"tampered");
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
