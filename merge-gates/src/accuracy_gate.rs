//! The `accuracy` gate: a proposal that changes a target's cost-model calibration
//! (`calibration/<target>.toml`) must be at least as accurate as the base tree's on the measured
//! runs it commits with itself (`calibration/runs/<target>-<hash>.json`, written by
//! `cake-evolve-compiler calibrate`), and meet the floor of issue 7 (Spearman ≥ 0.8, MAPE ≤ 25%).
//!
//! The check runs the current cost model in-process on both trees' parameter files, so at
//! `accept` — where the base is the current main — it also catches a calibration that was good
//! against the main it was made on but not against the one it would merge into.

use std::collections::BTreeSet;

use cake::cost::accuracy::{judge, validated, Accuracy, SavedRun, RUN_SCHEMA};
use cake::cost::Calibration;

use crate::{Change, ChangedPath, GateResult, Tree};

pub const TITLE: &str = "a recalibration is at least as accurate on its committed runs";
/// Floors a calibration must meet on its accuracy runs.
pub const MIN_SPEARMAN: f64 = 0.8;
pub const MAX_MAPE: f64 = 25.0;
/// Slack against the base: measurement noise, not a regression.
const MAPE_SLACK: f64 = 0.5;
const SPEARMAN_SLACK: f64 = 0.01;

/// Targets whose calibration file the proposal adds or changes.
fn changed_targets(changed: &[ChangedPath]) -> BTreeSet<String> {
    changed
        .iter()
        .filter(|c| c.change != Change::Deleted)
        .filter_map(|c| c.path.strip_prefix("calibration/")?.strip_suffix(".toml").map(str::to_string))
        .filter(|t| !t.contains('/'))
        .collect()
}

pub fn gate(proposal: &Tree, base: &Tree, changed: &[ChangedPath]) -> GateResult {
    const G: &str = "accuracy";
    let targets = changed_targets(changed);
    if targets.is_empty() {
        return GateResult::na(G, TITLE, "no calibration changed");
    }
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    for target in &targets {
        match check_target(proposal, base, changed, target) {
            Ok(line) => lines.push(line),
            Err(e) => problems.push(format!("{target}: {e}")),
        }
    }
    if problems.is_empty() {
        GateResult::pass(G, TITLE, lines.join("; "))
    } else {
        GateResult::fail(G, TITLE, format!("{} of {} recalibrated target(s) fail", problems.len(), targets.len()), problems)
    }
}

fn fmt(a: &Accuracy) -> String {
    format!("Spearman {:.3}, MAPE {:.1}%", a.spearman, a.mape)
}

/// Why a target's recalibration fails the gate (or cannot be judged).
#[derive(Debug, thiserror::Error)]
pub enum AccuracyProblem {
    #[error("{file}: {message}")]
    Read { file: String, message: String },
    #[error("{0}")]
    Calibration(#[from] cake::cost::CalibrationError),
    #[error("{file} is missing from the proposal")]
    Missing { file: String },
    #[error("the proposal changes {file} but commits no measured runs ({prefix}*.json) to judge it on")]
    NoRuns { file: String, prefix: String },
    #[error("{file}: not a calibration run ({RUN_SCHEMA}): {message}")]
    NotARun { file: String, message: String },
    #[error("{file}: schema `{schema}` for {target}, expected {RUN_SCHEMA} for {wanted}")]
    WrongRun { file: String, schema: String, target: String, wanted: String },
    #[error("{0}")]
    TooFew(#[from] cake::cost::accuracy::TooFewMeasurements),
    #[error("{} over {} runs is below the floor (Spearman ≥ {MIN_SPEARMAN}, MAPE ≤ {MAX_MAPE}%)", fmt(.after), .after.n)]
    BelowFloor { after: Accuracy },
    #[error("less accurate than the base over {} runs: {} before, {} after", .after.n, fmt(.before), fmt(.after))]
    LessAccurate { before: Accuracy, after: Accuracy },
}

fn check_target(proposal: &Tree, base: &Tree, changed: &[ChangedPath], target: &str) -> Result<String, AccuracyProblem> {
    let rel = format!("calibration/{target}.toml");
    let load = |tree: &Tree| -> Result<Option<Calibration>, AccuracyProblem> {
        let path = tree.root.join(&rel);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| AccuracyProblem::Read { file: path.display().to_string(), message: e.to_string() })?;
        Ok(Some(Calibration::from_toml_str(&rel, &text)?))
    };
    let new = load(proposal)?.ok_or_else(|| AccuracyProblem::Missing { file: rel.clone() })?;
    let old = load(base)?;
    // The runs the proposal commits for this target.
    let prefix = format!("calibration/runs/{target}-");
    let run_paths: Vec<&ChangedPath> = changed.iter().filter(|c| c.change != Change::Deleted && c.path.starts_with(&prefix) && c.path.ends_with(".json")).collect();
    if run_paths.is_empty() {
        return Err(AccuracyProblem::NoRuns { file: rel, prefix });
    }
    let mut runs = Vec::new();
    for c in run_paths {
        let path = proposal.root.join(&c.path);
        let text = std::fs::read_to_string(&path).map_err(|e| AccuracyProblem::Read { file: c.path.clone(), message: e.to_string() })?;
        let run: SavedRun =
            serde_json::from_str(&text).map_err(|e| AccuracyProblem::NotARun { file: c.path.clone(), message: e.to_string() })?;
        if run.schema != RUN_SCHEMA || run.target != target {
            return Err(AccuracyProblem::WrongRun { file: c.path.clone(), schema: run.schema, target: run.target, wanted: target.to_string() });
        }
        runs.push(run);
    }
    let mut skipped = Vec::new();
    let ms = validated(target, runs.iter().flat_map(|r| r.accuracy.iter()), &mut skipped);
    let Some(old) = old else {
        // A first calibration: only the floor applies.
        let (_, after) = judge(&new, &new, &ms, &mut skipped)?;
        return floor(&after).map(|_| format!("{target}: first calibration, {} over {} runs", fmt(&after), after.n));
    };
    let (before, after) = judge(&old, &new, &ms, &mut skipped)?;
    floor(&after)?;
    if after.mape > before.mape + MAPE_SLACK || after.spearman < before.spearman - SPEARMAN_SLACK {
        return Err(AccuracyProblem::LessAccurate { before, after });
    }
    Ok(format!("{target}: {} → {} over {} runs", fmt(&before), fmt(&after), after.n))
}

fn floor(a: &Accuracy) -> Result<(), AccuracyProblem> {
    if a.spearman < MIN_SPEARMAN || a.mape > MAX_MAPE {
        return Err(AccuracyProblem::BelowFloor { after: a.clone() });
    }
    Ok(())
}
