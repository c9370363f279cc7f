//! Gate results: one line per gate, with the reasons, serializable into a proposal's record.

use serde::{Deserialize, Serialize};

/// The verdict of one gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    /// Checked mechanically and holds.
    Pass,
    /// Checked mechanically and does not hold: the change must not merge.
    Fail,
    /// Not mechanically decidable: a reviewer must look (does not block on its own).
    Flag,
    /// Does not apply to this change (a rule adds no syntax, so P1 is moot).
    Na,
}

impl GateStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GateStatus::Pass => "pass",
            GateStatus::Fail => "FAIL",
            GateStatus::Flag => "flag",
            GateStatus::Na => "n/a",
        }
    }
}

/// One gate's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateResult {
    /// `data-only`, `schema`, `corpus`, `P1` … `P8`, `lowering`.
    pub gate: String,
    /// What the gate checks, in a few words.
    pub title: String,
    pub status: GateStatus,
    /// One line: why it passed or failed.
    pub summary: String,
    /// The specifics: each offending case, op or rule, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl GateResult {
    pub fn new(gate: &str, title: &str, status: GateStatus, summary: impl Into<String>, details: Vec<String>) -> GateResult {
        GateResult { gate: gate.to_string(), title: title.to_string(), status, summary: summary.into(), details }
    }
    pub fn pass(gate: &str, title: &str, summary: impl Into<String>) -> GateResult {
        GateResult::new(gate, title, GateStatus::Pass, summary, vec![])
    }
    pub fn fail(gate: &str, title: &str, summary: impl Into<String>, details: Vec<String>) -> GateResult {
        GateResult::new(gate, title, GateStatus::Fail, summary, details)
    }
    pub fn flag(gate: &str, title: &str, summary: impl Into<String>, details: Vec<String>) -> GateResult {
        GateResult::new(gate, title, GateStatus::Flag, summary, details)
    }
    pub fn na(gate: &str, title: &str, summary: impl Into<String>) -> GateResult {
        GateResult::new(gate, title, GateStatus::Na, summary, vec![])
    }
}

/// Every gate's result for one change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateReport {
    /// True when no gate failed (flags do not block; the reviewer sees them).
    pub passed: bool,
    pub gates: Vec<GateResult>,
}

impl GateReport {
    pub fn new(gates: Vec<GateResult>) -> GateReport {
        let passed = !gates.iter().any(|g| g.status == GateStatus::Fail);
        GateReport { passed, gates }
    }

    pub fn get(&self, gate: &str) -> Option<&GateResult> {
        self.gates.iter().find(|g| g.gate == gate)
    }

    /// The failing gates.
    pub fn failures(&self) -> impl Iterator<Item = &GateResult> {
        self.gates.iter().filter(|g| g.status == GateStatus::Fail)
    }

    /// A plain-text table: gate, status, summary; then the details of failing and flagged gates.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let w = self.gates.iter().map(|g| g.gate.len()).max().unwrap_or(4).max(4);
        out.push_str(&format!("{:<w$}  {:<6}  {}\n", "gate", "status", "summary"));
        for g in &self.gates {
            out.push_str(&format!("{:<w$}  {:<6}  {} — {}\n", g.gate, g.status.as_str(), g.title, g.summary));
        }
        for g in self.gates.iter().filter(|g| matches!(g.status, GateStatus::Fail | GateStatus::Flag) && !g.details.is_empty()) {
            out.push_str(&format!("\n{} ({}):\n", g.gate, g.status.as_str()));
            for d in &g.details {
                out.push_str(&format!("  - {d}\n"));
            }
        }
        out
    }

    /// One line: `gates: pass (11 pass, 2 flag)` / `gates: FAIL (corpus, P6)`.
    pub fn summary_line(&self) -> String {
        if self.passed {
            let flags = self.gates.iter().filter(|g| g.status == GateStatus::Flag).count();
            let passes = self.gates.iter().filter(|g| g.status == GateStatus::Pass).count();
            format!("gates: pass ({passes} pass, {flags} flagged for review)")
        } else {
            let names: Vec<&str> = self.failures().map(|g| g.gate.as_str()).collect();
            format!("gates: FAIL ({})", names.join(", "))
        }
    }
}
