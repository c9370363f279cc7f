//! Classifying a gate run against a baseline the way Crater does, and the markdown report.
//!
//! Per (case, tier), with the baseline's status on the left:
//!
//! | baseline → now | class |
//! |---|---|
//! | pass → fail/error | **regressed** |
//! | fail/error → pass | fixed |
//! | pass → pass | same-pass |
//! | fail/error → fail/error | same-fail |
//! | any → spurious (timeout, OOM, flaky; retried once) | spurious |
//! | any → skipped (tier unavailable here) | skipped |
//! | absent/skipped/spurious → pass | new-pass |
//! | absent/skipped/spurious → fail/error | **new-fail** |
//!
//! The gate fails (non-zero exit) on any regressed or new-fail result; without a baseline every
//! result is new, so any failure fails the gate.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use super::results::{CaseResult, GateResults, Status};
use super::{Selection, Tier};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Regressed,
    NewFail,
    Fixed,
    SameFail,
    Spurious,
    Skipped,
    NewPass,
    SamePass,
}

impl Class {
    pub const ALL: [Class; 8] =
        [Class::Regressed, Class::NewFail, Class::Fixed, Class::SameFail, Class::Spurious, Class::Skipped, Class::NewPass, Class::SamePass];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Regressed => "regressed",
            Class::NewFail => "new-fail",
            Class::Fixed => "fixed",
            Class::SameFail => "same-fail",
            Class::Spurious => "spurious",
            Class::Skipped => "skipped",
            Class::NewPass => "new-pass",
            Class::SamePass => "same-pass",
        }
    }

    /// Whether this class fails the gate.
    pub fn is_blocking(self) -> bool {
        matches!(self, Class::Regressed | Class::NewFail)
    }

    fn meaning(self) -> &'static str {
        match self {
            Class::Regressed => "passed in the baseline, fails now",
            Class::NewFail => "fails, and the baseline has no result to excuse it (new case, or no baseline)",
            Class::Fixed => "failed in the baseline, passes now",
            Class::SameFail => "failed in the baseline and fails now (a known failure)",
            Class::Spurious => "timed out or ran out of memory twice, or changed on the retry (flaky); says nothing about the compiler",
            Class::Skipped => "the tier cannot run here",
            Class::NewPass => "passes; not in the baseline (new case, or no baseline)",
            Class::SamePass => "passed in the baseline and passes now",
        }
    }
}

/// One classified result.
#[derive(Clone, Debug, Serialize)]
pub struct Classified {
    pub class: Class,
    pub baseline: Option<Status>,
    pub result: CaseResult,
}

/// A classified gate run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub baseline: Option<String>,
    pub items: Vec<Classified>,
    /// (case, tier) in the baseline, selected and of a tier that ran, but absent now.
    pub missing: Vec<(String, Tier)>,
}

/// Classify `current` against `baseline`. `selection` limits which baseline entries are expected
/// (a `--family` or `--shard` run does not miss the other cases).
pub fn classify(current: &GateResults, baseline: Option<(&str, &GateResults)>, selection: &Selection) -> Report {
    let base: BTreeMap<(String, Tier), Status> =
        baseline.map(|(_, b)| b.results.iter().map(|r| (r.key(), r.status)).collect()).unwrap_or_default();
    let mut items = Vec::new();
    for r in &current.results {
        let b = base.get(&r.key()).copied();
        let class = match (b, r.status) {
            (_, Status::Spurious) => Class::Spurious,
            (_, Status::Skipped) => Class::Skipped,
            (Some(Status::Pass), Status::Pass) => Class::SamePass,
            (Some(Status::Pass), _) => Class::Regressed,
            (Some(s), Status::Pass) if s.is_failure() => Class::Fixed,
            (Some(s), _) if s.is_failure() => Class::SameFail,
            (_, Status::Pass) => Class::NewPass,
            (_, _) => Class::NewFail,
        };
        items.push(Classified { class, baseline: b, result: r.clone() });
    }
    let now: BTreeSet<(String, Tier)> = current.results.iter().map(CaseResult::key).collect();
    let missing = match baseline {
        Some((_, b)) => b
            .results
            .iter()
            .filter(|r| current.tiers.contains(&r.tier) && selection.selects(&r.id, &r.family) && !now.contains(&r.key()))
            .map(CaseResult::key)
            .collect(),
        None => Vec::new(),
    };
    Report { baseline: baseline.map(|(p, _)| p.to_string()), items, missing }
}

impl Report {
    pub fn count(&self, class: Class) -> usize {
        self.items.iter().filter(|i| i.class == class).count()
    }

    /// Whether the gate fails.
    pub fn is_failure(&self) -> bool {
        self.items.iter().any(|i| i.class.is_blocking())
    }

    pub fn of(&self, class: Class) -> impl Iterator<Item = &Classified> {
        self.items.iter().filter(move |i| i.class == class)
    }

    /// One line for the terminal.
    pub fn summary_line(&self) -> String {
        let parts: Vec<String> =
            Class::ALL.iter().filter(|c| self.count(**c) > 0).map(|c| format!("{} {}", self.count(*c), c.as_str())).collect();
        let verdict = if self.is_failure() { "FAIL" } else { "ok" };
        format!(
            "corpus gate {verdict}: {} results: {}",
            self.items.len(),
            if parts.is_empty() { "none".to_string() } else { parts.join(", ") }
        )
    }

    /// The regressed (and new-fail) results, one per line, for the terminal.
    pub fn blocking_lines(&self) -> Vec<String> {
        self.items
            .iter()
            .filter(|i| i.class.is_blocking())
            .map(|i| format!("{}: {} [{}] {}", i.class.as_str(), i.result.id, i.result.tier, i.result.reason))
            .collect()
    }

    /// Results per family, sorted by family: pass (same, new, fixed), fail (regressed, new,
    /// same), skipped and spurious.
    pub fn families(&self) -> Vec<FamilyCounts<'_>> {
        let mut fam: BTreeMap<&str, BTreeMap<Class, usize>> = BTreeMap::new();
        let mut fam_cases: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for i in &self.items {
            *fam.entry(i.result.family.as_str()).or_default().entry(i.class).or_default() += 1;
            fam_cases.entry(i.result.family.as_str()).or_default().insert(i.result.id.as_str());
        }
        fam.iter()
            .map(|(f, counts)| {
                let get = |cs: &[Class]| cs.iter().map(|c| counts.get(c).copied().unwrap_or(0)).sum::<usize>();
                FamilyCounts {
                    family: f,
                    cases: fam_cases[f].len(),
                    pass: get(&[Class::SamePass, Class::NewPass, Class::Fixed]),
                    fail: get(&[Class::Regressed, Class::NewFail, Class::SameFail]),
                    skipped: get(&[Class::Skipped]),
                    spurious: get(&[Class::Spurious]),
                }
            })
            .collect()
    }

    /// The markdown report. `families` maps family names to their description line; `plot` is
    /// the per-family figure's path relative to the report, embedded above the families' table.
    pub fn markdown(&self, current: &GateResults, families: &BTreeMap<String, String>, plot: Option<&str>) -> String {
        let mut s = String::new();
        let cases: BTreeSet<&str> = current.results.iter().map(|r| r.id.as_str()).collect();
        let tiers: Vec<&str> = current.tiers.iter().map(|t| t.as_str()).collect();
        let _ = writeln!(s, "# Corpus gate report\n");
        let _ = writeln!(
            s,
            "cake {} · tiers: {} · {} cases, {} results · {:.1} s{}{}\n",
            current.compiler,
            tiers.join(", "),
            cases.len(),
            current.results.len(),
            current.wall_s,
            current.shard.as_ref().map(|x| format!(" · shard {x}")).unwrap_or_default(),
            if current.families.is_empty() { String::new() } else { format!(" · families: {}", current.families.join(", ")) },
        );
        let _ =
            writeln!(s, "Baseline: {}\n", self.baseline.as_deref().map_or("none (every failure counts)".to_string(), |b| format!("`{b}`")));
        if self.is_failure() {
            let _ = writeln!(
                s,
                "**Verdict: FAIL** — {} regressed, {} new failing.\n",
                self.count(Class::Regressed),
                self.count(Class::NewFail)
            );
        } else {
            let _ = writeln!(s, "**Verdict: PASS** — no regressions.\n");
        }
        let _ = writeln!(s, "| class | results | meaning |\n|---|---:|---|");
        for c in Class::ALL {
            let _ = writeln!(s, "| {} | {} | {} |", c.as_str(), self.count(c), c.meaning());
        }
        let _ = writeln!(s);
        if !current.environment.is_empty() {
            let _ = writeln!(s, "## Environment\n");
            for (k, v) in &current.environment {
                let _ = writeln!(s, "- {k}: {v}");
            }
            let _ = writeln!(s);
        }

        for class in [Class::Regressed, Class::NewFail, Class::Fixed, Class::SameFail, Class::Spurious] {
            let n = self.count(class);
            if n == 0 {
                continue;
            }
            let _ = writeln!(s, "## {} ({n})\n", title(class));
            let _ = writeln!(s, "| case | tier | baseline | now | reason |\n|---|---|---|---|---|");
            for i in self.of(class) {
                let _ = writeln!(
                    s,
                    "| `{}` | {} | {} | {} | {} |",
                    i.result.id,
                    i.result.tier,
                    i.baseline.map_or("—", Status::as_str),
                    i.result.status.as_str(),
                    cell(&i.result.reason)
                );
            }
            let _ = writeln!(s);
        }

        let skipped: Vec<&Classified> = self.of(Class::Skipped).collect();
        if !skipped.is_empty() {
            let _ = writeln!(s, "## Skipped ({})\n", skipped.len());
            let mut by: BTreeMap<(Tier, &str), Vec<&str>> = BTreeMap::new();
            for i in &skipped {
                by.entry((i.result.tier, i.result.reason.as_str())).or_default().push(i.result.id.as_str());
            }
            let _ = writeln!(s, "| tier | reason | results |\n|---|---|---:|");
            for ((tier, reason), ids) in &by {
                let _ = writeln!(s, "| {tier} | {} | {} |", cell(reason), ids.len());
            }
            let _ = writeln!(s);
        }

        if !self.missing.is_empty() {
            let _ = writeln!(s, "## In the baseline but not run ({})\n", self.missing.len());
            let _ = writeln!(s, "Removed or renamed cases, or a tier a case no longer lists; update the baseline if intended.\n");
            for (id, tier) in &self.missing {
                let _ = writeln!(s, "- `{id}` ({tier})");
            }
            let _ = writeln!(s);
        }

        if let Some(svg) = plot {
            let _ = writeln!(s, "![results per family]({svg})\n");
        }
        let _ = writeln!(s, "## Families\n");
        let _ = writeln!(s, "| family | cases | pass | fail | skipped | spurious | covers |\n|---|---:|---:|---:|---:|---:|---|");
        for f in self.families() {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                f.family,
                f.cases,
                f.pass,
                f.fail,
                f.skipped,
                f.spurious,
                cell(families.get(f.family).map_or("", String::as_str))
            );
        }
        s
    }
}

/// One family's results (see [`Report::families`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyCounts<'a> {
    pub family: &'a str,
    pub cases: usize,
    pub pass: usize,
    pub fail: usize,
    pub skipped: usize,
    pub spurious: usize,
}

fn title(c: Class) -> &'static str {
    match c {
        Class::Regressed => "Regressed",
        Class::NewFail => "New failures",
        Class::Fixed => "Fixed",
        Class::SameFail => "Same failures (known)",
        Class::Spurious => "Spurious",
        Class::Skipped => "Skipped",
        Class::NewPass => "New passes",
        Class::SamePass => "Same passes",
    }
}

/// Text safe in a markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::results::Observed;

    fn r(id: &str, status: Status) -> CaseResult {
        CaseResult {
            id: id.into(),
            family: "f".into(),
            tier: Tier::Static,
            status,
            reason: String::new(),
            duration_ms: 0.0,
            attempts: 1,
            observed: Observed::default(),
        }
    }

    #[test]
    fn crater_classes() {
        let mut base = GateResults::new(vec![Tier::Static]);
        base.results = vec![
            r("f/a", Status::Pass),
            r("f/b", Status::Pass),
            r("f/c", Status::Fail),
            r("f/d", Status::Fail),
            r("f/gone", Status::Pass),
            r("f/s", Status::Pass),
            r("f/k", Status::Pass),
        ];
        let mut now = GateResults::new(vec![Tier::Static]);
        now.results = vec![
            r("f/a", Status::Pass),
            r("f/b", Status::Fail),
            r("f/c", Status::Pass),
            r("f/d", Status::Error),
            r("f/new", Status::Fail),
            r("f/s", Status::Spurious),
            r("f/k", Status::Skipped),
        ];
        let rep = classify(&now, Some(("base.json", &base)), &Selection::default());
        let classes: Vec<(String, Class)> = rep.items.iter().map(|i| (i.result.id.clone(), i.class)).collect();
        assert_eq!(
            classes,
            vec![
                ("f/a".into(), Class::SamePass),
                ("f/b".into(), Class::Regressed),
                ("f/c".into(), Class::Fixed),
                ("f/d".into(), Class::SameFail),
                ("f/new".into(), Class::NewFail),
                ("f/s".into(), Class::Spurious),
                ("f/k".into(), Class::Skipped),
            ]
        );
        assert_eq!(rep.missing, vec![("f/gone".to_string(), Tier::Static)]);
        assert!(rep.is_failure());
        let md = rep.markdown(&now, &BTreeMap::new(), None);
        assert!(md.contains("## Regressed (1)") && md.contains("`f/b`"), "{md}");

        // Without a baseline any failure fails the gate.
        let rep = classify(&now, None, &Selection::default());
        assert!(rep.is_failure());
        let mut ok = GateResults::new(vec![Tier::Static]);
        ok.results = vec![r("f/a", Status::Pass), r("f/k", Status::Skipped)];
        assert!(!classify(&ok, None, &Selection::default()).is_failure());
    }
}
