//! Judging a calibration against measured times: the measurement type, the accuracy metrics
//! (Spearman rank correlation, MAPE, top-k recall), and the calibration-run file that
//! `cake-evolve-compiler calibrate` writes (`calibration/runs/<target>-<hash>.json`) and the merge
//! gate re-reads to check a calibration proposal's accuracy on the tree it would merge into.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cost::Calibration;
use crate::verify::Validated;

/// One timed run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// A label (the corpus case or program path).
    pub name: String,
    /// The program's source.
    pub program: String,
    pub dims: BTreeMap<String, i64>,
    pub measured_ms: f64,
}

/// Accuracy of predictions against measurements.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    pub n: usize,
    pub spearman: f64,
    /// Mean absolute percentage error, in percent.
    pub mape: f64,
    pub k: usize,
    /// Share of the k fastest measured programs that the model also ranks in its k fastest.
    pub top_k_recall: f64,
}

/// Spearman rank correlation (average ranks for ties).
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            let avg = (i + j) as f64 / 2.0 + 1.0;
            for k in i..=j {
                r[idx[k]] = avg;
            }
            i = j + 1;
        }
        r
    }
    if x.len() < 2 {
        return 0.0;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    if vx == 0.0 || vy == 0.0 {
        0.0
    } else {
        cov / (vx * vy).sqrt()
    }
}

/// Mean absolute percentage error of `pred` against `meas`, in percent.
pub fn mape(pred: &[f64], meas: &[f64]) -> f64 {
    if pred.is_empty() {
        return 0.0;
    }
    100.0 * pred.iter().zip(meas).map(|(p, m)| ((p - m) / m).abs()).sum::<f64>() / pred.len() as f64
}

/// Of the `k` smallest measured values, the share that are among the `k` smallest predicted.
pub fn top_k_recall(pred: &[f64], meas: &[f64], k: usize) -> f64 {
    let k = k.min(pred.len());
    if k == 0 {
        return 0.0;
    }
    let top = |v: &[f64]| -> Vec<usize> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]).then(a.cmp(b)));
        idx.truncate(k);
        idx
    };
    let (tp, tm) = (top(pred), top(meas));
    tm.iter().filter(|i| tp.contains(i)).count() as f64 / k as f64
}

pub fn accuracy(pred: &[f64], meas: &[f64]) -> Accuracy {
    let k = (pred.len() / 5).max(1);
    Accuracy { n: pred.len(), spearman: round4(spearman(pred, meas)), mape: round4(mape(pred, meas)), k, top_k_recall: round4(top_k_recall(pred, meas, k)) }
}

/// Rounded to 4 decimals (what records and files show).
pub fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Validate the programs of measurements for `target`; the rest are skipped with a reason.
pub fn validated<'m>(target: &str, ms: impl IntoIterator<Item = &'m Measurement>, skipped: &mut Vec<String>) -> Vec<(Validated, &'m Measurement)> {
    let mut out = Vec::new();
    for m in ms {
        if !(m.measured_ms.is_finite() && m.measured_ms > 0.0) {
            skipped.push(format!("{}: measured time {} is not positive", m.name, m.measured_ms));
            continue;
        }
        match crate::check::check_source(&m.program).validated {
            Some(v) if v.module().target == target => out.push((v, m)),
            Some(v) => skipped.push(format!("{}: a {} program, not {target}", m.name, v.module().target)),
            None => skipped.push(format!("{}: the program does not validate", m.name)),
        }
    }
    out
}

/// Predicted times of `ms` under `cal` (None: a program the model cannot predict at its dims).
pub fn predictions(cal: &Calibration, ms: &[(Validated, &Measurement)]) -> Vec<Option<f64>> {
    ms.iter().map(|(v, m)| crate::cost::estimate(v, cal, &m.dims).ok().map(|e| e.predicted_ms)).collect()
}

/// The fewest measurements a calibration is judged on: a rank correlation of fewer says nothing.
pub const MIN_JUDGED: usize = 3;

/// Too few accuracy measurements that both calibrations predict to judge one against the other.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{predicted} accuracy measurement(s) the model predicts; judging a calibration needs at least {needed}")]
pub struct TooFewMeasurements {
    pub predicted: usize,
    pub needed: usize,
}

/// Accuracy of the old and the new calibration on the same measurements (those both predict);
/// the others are added to `skipped`. Needs at least [`MIN_JUDGED`].
pub fn judge(
    old: &Calibration,
    new: &Calibration,
    acc: &[(Validated, &Measurement)],
    skipped: &mut Vec<String>,
) -> Result<(Accuracy, Accuracy), TooFewMeasurements> {
    let (a, b) = (predictions(old, acc), predictions(new, acc));
    let mut pb = Vec::new();
    let mut pa = Vec::new();
    let mut meas = Vec::new();
    for ((x, y), (_, m)) in a.iter().zip(&b).zip(acc) {
        match (x, y) {
            (Some(x), Some(y)) => {
                pb.push(*x);
                pa.push(*y);
                meas.push(m.measured_ms);
            }
            _ => skipped.push(format!("{}: the cost model cannot predict it at these dims", m.name)),
        }
    }
    if meas.len() < MIN_JUDGED {
        return Err(TooFewMeasurements { predicted: meas.len(), needed: MIN_JUDGED });
    }
    Ok((accuracy(&pb, &meas), accuracy(&pa, &meas)))
}

/// A microbenchmark measurement: which bench it belongs to, and the timed run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchMeasurement {
    pub bench: String,
    #[serde(flatten)]
    pub m: Measurement,
}

/// Everything one measurement run produced: what `--save-measurements` writes and
/// `--from-saved` reads, so a run on a GPU machine can be proposed on another.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedRun {
    pub schema: String,
    pub target: String,
    /// The GPU the runs were timed on (from the run records).
    pub gpu: String,
    /// Seconds since the Unix epoch when the run ended.
    pub created_unix: u64,
    pub suite: Vec<BenchMeasurement>,
    pub accuracy: Vec<Measurement>,
    /// Runs that did not produce a time, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

pub const RUN_SCHEMA: &str = "cake.calibration-run/1";

