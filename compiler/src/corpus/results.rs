//! The results file of a gate run (JSON): one record per (case, tier), sorted by case id and
//! tier, so two runs diff cleanly and shards merge by union.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::CorpusError;
use super::{FindingSpec, Tier, Verdict};

/// The schema tag of results files; a reader refuses any other.
pub const SCHEMA: &str = "cake-corpus-results/1";

/// The status of one (case, tier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Every expectation held.
    Pass,
    /// An expectation did not hold (a wrong verdict, a different finding, a bound exceeded, an
    /// unsupported construct in lowering, an oracle mismatch).
    Fail,
    /// The harness could not judge the case (a broken manifest, a missing program, a compiler
    /// panic). Counts as a failure.
    Error,
    /// The tier cannot run here (no toolchain, no GPU, no lowering in this build); the reason
    /// says which.
    Skipped,
    /// The result says nothing about the compiler: a timeout or out-of-memory twice, or a result
    /// that changed on the retry (flaky).
    Spurious,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Error => "error",
            Status::Skipped => "skipped",
            Status::Spurious => "spurious",
        }
    }

    /// Fail or error.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Fail | Status::Error)
    }
}

/// What a tier observed (kept in the results so a reviewer sees *what* changed, and `--bless`
/// knows what to write).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// Static tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<FindingSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<FindingSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<FindingSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_limits: Option<Vec<FindingSpec>>,
    /// Compile tier: the ptxas facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spills: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smem: Option<u64>,
    /// GPU tier: the largest error against the oracle and the median time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_error: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us: Option<f64>,
}

/// One (case, tier) result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    pub family: String,
    pub tier: Tier,
    pub status: Status,
    /// Why (empty for a plain pass).
    #[serde(default)]
    pub reason: String,
    /// Wall-clock milliseconds of the attempts together.
    #[serde(default)]
    pub duration_ms: f64,
    /// 1, or 2 when the case was retried (after a failure, a timeout or out-of-memory).
    #[serde(default = "one")]
    pub attempts: u32,
    #[serde(default)]
    pub observed: Observed,
}

fn one() -> u32 {
    1
}

impl CaseResult {
    pub fn key(&self) -> (String, Tier) {
        (self.id.clone(), self.tier)
    }
}

/// A whole gate run (or the merge of several shards).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateResults {
    pub schema: String,
    /// `cake` version that produced it.
    pub compiler: String,
    /// Tiers that were asked for.
    pub tiers: Vec<Tier>,
    /// `i/n` when this is one shard; absent for a full run or a merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// Families asked for (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<String>,
    /// Case filters asked for (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub case_filters: Vec<String>,
    /// Where each tier could run, or why not (`static: yes`, `compile: no CUDA toolchain`...).
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Wall-clock seconds of the run (the sum of the shards' for a merge).
    #[serde(default)]
    pub wall_s: f64,
    /// Sorted by (id, tier).
    pub results: Vec<CaseResult>,
}

impl GateResults {
    pub fn new(tiers: Vec<Tier>) -> GateResults {
        GateResults {
            schema: SCHEMA.to_string(),
            compiler: env!("CARGO_PKG_VERSION").to_string(),
            tiers,
            shard: None,
            families: Vec::new(),
            case_filters: Vec::new(),
            environment: BTreeMap::new(),
            wall_s: 0.0,
            results: Vec::new(),
        }
    }

    pub fn sort(&mut self) {
        self.results.sort_by(|a, b| (a.id.as_str(), a.tier).cmp(&(b.id.as_str(), b.tier)));
    }

    pub fn read(path: &Path) -> Result<GateResults, CorpusError> {
        let text = fs::read_to_string(path).map_err(|e| CorpusError::Read { path: path.to_path_buf(), message: e.to_string() })?;
        let r: GateResults =
            serde_json::from_str(&text).map_err(|e| CorpusError::NotResults { path: path.to_path_buf(), message: e.to_string() })?;
        if r.schema != SCHEMA {
            return Err(CorpusError::Schema { path: path.to_path_buf(), found: r.schema, expected: SCHEMA });
        }
        Ok(r)
    }

    pub fn write(&self, path: &Path) -> Result<(), CorpusError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| CorpusError::write("create", dir, e))?;
        }
        let mut text = serde_json::to_string_pretty(self).map_err(|e| CorpusError::write("write", path, e))?;
        text.push('\n');
        fs::write(path, text).map_err(|e| CorpusError::write("write", path, e))
    }

    /// Join shard results. The same (case, tier) in two inputs is an error unless both records
    /// agree on status and observation (a case run twice by overlapping shards).
    pub fn merge(parts: Vec<GateResults>) -> Result<GateResults, CorpusError> {
        let mut tiers: Vec<Tier> = Vec::new();
        let mut out = GateResults::new(Vec::new());
        let mut seen: BTreeMap<(String, Tier), CaseResult> = BTreeMap::new();
        let mut families: Vec<String> = Vec::new();
        // A part that asked for every family (no list) makes the union every family too.
        let every_family = parts.iter().any(|p| p.families.is_empty());
        for (i, part) in parts.into_iter().enumerate() {
            for t in &part.tiers {
                if !tiers.contains(t) {
                    tiers.push(*t);
                }
            }
            for f in &part.families {
                if !families.contains(f) {
                    families.push(f.clone());
                }
            }
            for (k, v) in &part.environment {
                let e = out.environment.entry(k.clone()).or_insert_with(|| v.clone());
                if e != v && !e.contains(v.as_str()) {
                    e.push_str(&format!("; {v}"));
                }
            }
            out.wall_s += part.wall_s;
            for r in part.results {
                match seen.get(&r.key()) {
                    Some(prev) if prev.status != r.status || prev.observed != r.observed => {
                        return Err(CorpusError::Overlap { id: r.id.clone(), tier: r.tier, input: i + 1 });
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(r.key(), r);
                    }
                }
            }
        }
        tiers.sort();
        out.tiers = tiers;
        out.families = if every_family { Vec::new() } else { families };
        out.results = seen.into_values().collect();
        out.sort();
        Ok(out)
    }
}
