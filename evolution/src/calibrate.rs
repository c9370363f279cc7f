//! Calibration proposals: refit the cost-model parameters of the op class whose predictions
//! are systematically off, and show the accuracy before and after.
//!
//! Input: measurements (a program, the dims it ran at, the measured time on the target's GPU).
//! The current `calibration/<target>.toml` predicts each one with the real cost model
//! (`cake::cost::estimate`); measurements are grouped by the bottleneck class the model names.
//! A class is **systematically** mispredicted when at least three of its measurements agree in
//! the sign of `log(measured / predicted)` (three quarters or more) and the median ratio is off
//! by more than 10%. The class with the largest total error gets its parameters scaled by one
//! factor (rates divided, latencies multiplied, fractions divided and capped at 1), the factor
//! chosen on a log-spaced grid to minimize the mean absolute log error over **all**
//! measurements (a change of shared parameters must not buy one class's accuracy with
//! another's). The proposal is the rewritten file — the changed parameters' `value` and `source`,
//! `[meta] fitted_on`, `[meta.accuracy]` — with Spearman rank correlation, MAPE and top-k recall
//! before and after. Measurements come from a JSON file (`calibrate --measurements FILE`) or from
//! the evidence store's timed runs (`propose`, for `cost_model.misprediction` buckets); the
//! microbenchmark-suite fit is `crate::microbench`.

use std::collections::BTreeMap;

use cake::cost::{Bottleneck, Calibration};
pub use cake::cost::accuracy::{accuracy, mape, round4, spearman, top_k_recall, validated, Accuracy, Measurement};
use serde::{Deserialize, Serialize};

/// A calibration proposal, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationDraft {
    pub target: String,
    /// The bottleneck class refitted (a class refit), or `microbenchmark suite`.
    pub class: String,
    /// measured / predicted, median over the class before the refit (a class refit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_ratio: Option<f64>,
    /// The time factor applied to the class's parameters (a class refit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// Changed parameters: `name: before -> after`.
    pub params: Vec<String>,
    pub before: Accuracy,
    pub after: Accuracy,
    /// Measurements the model could not predict (not valid, not calibrated, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Parameters fitted from microbenchmarks (a suite fit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fits: Vec<ParamFit>,
}

/// One parameter fitted from microbenchmarks (the suite fit). It lives here, beside the
/// draft that records it, so that `microbench` uses `calibrate` and not the other way round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamFit {
    pub param: String,
    pub bench: String,
    pub runs: usize,
    pub before: f64,
    pub after: f64,
    /// Mean |ln(predicted / measured)| over the bench's runs, before and after.
    pub log_error_before: f64,
    pub log_error_after: f64,
    /// Set when the best value lies on the search bound (×1/16 or ×16).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_bound: bool,
}

/// How a parameter responds to a time factor `f` on its class: a rate is divided by `f`, a
/// latency multiplied, a fraction divided (capped at 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    Rate,
    Latency,
    Fraction,
}

/// The parameters behind each bottleneck class.
fn class_params(b: Bottleneck) -> &'static [(&'static str, Scale)] {
    match b {
        Bottleneck::TensorCore => &[("tensor_sustained_fraction", Scale::Fraction)],
        Bottleneck::Memory => &[("dram_bytes_per_s", Scale::Rate), ("l2_bytes_per_s", Scale::Rate), ("l2_shared_bytes_per_s", Scale::Rate), ("sm_ingest_bytes_per_s", Scale::Rate)],
        Bottleneck::Epilogue => &[("alu_elems_per_s_per_sm", Scale::Rate), ("sfu_elems_per_s_per_sm", Scale::Rate), ("lsu_elems_per_s_per_sm", Scale::Rate), ("shfl_elems_per_s_per_sm", Scale::Rate)],
        Bottleneck::LatencySync => &[
            ("mbarrier_handoff_ns", Scale::Latency),
            ("bar_sync_ns", Scale::Latency),
            ("wgmma_wait_latency_ns", Scale::Latency),
            ("tma_latency_dram_ns", Scale::Latency),
            ("tma_latency_l2_ns", Scale::Latency),
            ("load_latency_ns", Scale::Latency),
            ("launch_overhead_ns", Scale::Latency),
            ("row_trip_latency_ns", Scale::Latency),
            ("l1_hit_latency_ns", Scale::Latency),
            ("div_latency_ns", Scale::Latency),
        ],
    }
}

/// One program in this many is held out of a refit from stored runs, to judge it.
pub const HELD_OUT_EVERY: u8 = 3;

/// Split measurements into the runs a refit may use and the runs that judge it, by program: every
/// run of a program (its name before ` @ `, which names the program and its hash) goes to the
/// same side, chosen by a stable hash, so no program is both fitted on and judged on.
pub fn split_held_out(ms: &[Measurement]) -> (Vec<Measurement>, Vec<Measurement>) {
    use sha2::{Digest, Sha256};
    let (mut fit, mut held_out) = (Vec::new(), Vec::new());
    for m in ms {
        let program = m.name.split(" @ ").next().unwrap_or(&m.name);
        if Sha256::digest(program.as_bytes())[0] % HELD_OUT_EVERY == 0 {
            held_out.push(m.clone());
        } else {
            fit.push(m.clone());
        }
    }
    (fit, held_out)
}

/// Judge a refit on runs it did not use: the draft's before/after become their accuracy under
/// the old and the new calibration text.
pub fn judge_held_out(target: &str, text: &str, mut draft: CalibrationDraft, new_text: &str, held_out: &[Measurement]) -> Result<CalibrationDraft, String> {
    let file = format!("calibration/{target}.toml");
    let old = Calibration::from_toml_str(&file, text).map_err(|e| e.to_string())?;
    let new = Calibration::from_toml_str(&file, new_text).map_err(|e| e.to_string())?;
    let mut skipped = Vec::new();
    let acc = validated(target, held_out.iter(), &mut skipped);
    let (before, after) = cake::cost::accuracy::judge(&old, &new, &acc, &mut skipped).map_err(|e| format!("the held-out runs cannot judge the refit: {e}"))?;
    draft.before = before;
    draft.after = after;
    draft.skipped.extend(skipped);
    Ok(draft)
}

/// Set `value` (and `source`) of `[param.NAME]` in a calibration file's text.
pub(crate) fn set_param(text: &str, name: &str, value: f64, source: &str) -> Result<String, String> {
    let header = format!("[param.{name}]");
    let mut out = Vec::new();
    let mut inside = false;
    let mut found = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            inside = t.starts_with(&header);
            found |= inside;
        }
        if inside && t.starts_with("value") && t[5..].trim_start().starts_with('=') {
            out.push(format!("value = {}", fmt_num(value)));
        } else if inside && t.starts_with("source") && t[6..].trim_start().starts_with('=') {
            out.push(format!("source = \"{}\"", source.replace('"', "'")));
        } else {
            out.push(line.to_string());
        }
    }
    if !found {
        return Err(format!("the calibration file has no [param.{name}]"));
    }
    Ok(out.join("\n") + "\n")
}

pub(crate) fn fmt_num(v: f64) -> String {
    if v.abs() >= 1e6 || (v.fract() == 0.0 && v.abs() >= 1.0) {
        let r = v.round();
        if (r - v).abs() < 1e-9 * v.abs().max(1.0) && r.abs() < 9e15 {
            return format!("{}", r as i64);
        }
        format!("{:.6e}", v)
    } else {
        format!("{}", round_sig(v, 6))
    }
}

pub(crate) fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let m = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * m).round() / m
}

/// Replace `[meta] fitted_on` and the `[meta.accuracy]` table.
pub(crate) fn set_meta(text: &str, fitted_on: &str, acc: &Accuracy) -> String {
    let mut out = Vec::new();
    let mut in_acc = false;
    let mut in_meta = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            if in_acc {
                out.push(format!("spearman = {}\nmape = {}\nn = {}\ntop_k_recall = {}\n", acc.spearman, acc.mape / 100.0, acc.n, acc.top_k_recall));
            }
            in_acc = t.starts_with("[meta.accuracy]");
            in_meta = t.starts_with("[meta]");
            out.push(line.to_string());
            continue;
        }
        if in_acc {
            continue; // rewritten at the end of the table
        }
        if in_meta && t.starts_with("fitted_on") {
            out.push(format!("fitted_on = \"{fitted_on}\""));
            continue;
        }
        out.push(line.to_string());
    }
    if in_acc {
        out.push(format!("spearman = {}\nmape = {}\nn = {}\ntop_k_recall = {}", acc.spearman, acc.mape / 100.0, acc.n, acc.top_k_recall));
    }
    out.join("\n") + "\n"
}

/// Predictions of every measurement under `cal` (`None` where the model cannot predict).
fn predict(cal: &Calibration, programs: &[(cake::verify::Validated, &Measurement)]) -> Vec<Option<(f64, Bottleneck)>> {
    programs.iter().map(|(v, m)| cake::cost::estimate(v, cal, &m.dims).ok().map(|e| (e.predicted_ms, e.bottleneck))).collect()
}

/// Refit the class with systematic error: `class` (a misprediction bucket's), or else the worst.
/// `text` is the current `calibration/<target>.toml`; `fitted_on` labels the fit (a date or the
/// measurement run). Returns the draft and the new file, or why there is nothing to propose.
pub fn propose_calibration(target: &str, text: &str, measurements: &[Measurement], fitted_on: &str, class: Option<Bottleneck>) -> Result<(CalibrationDraft, String), String> {
    let file = format!("calibration/{target}.toml");
    let cal = Calibration::from_toml_str(&file, text).map_err(|e| e.to_string())?;
    let mut skipped = Vec::new();
    let programs = validated(target, measurements, &mut skipped);
    let before = predict(&cal, &programs);
    let mut kept: Vec<usize> = (0..programs.len()).filter(|i| before[*i].is_some()).collect();
    for i in (0..programs.len()).filter(|i| before[*i].is_none()) {
        skipped.push(format!("{}: the cost model cannot predict it at these dims", programs[i].1.name));
    }
    kept.sort();
    if kept.len() < 3 {
        return Err(format!("{} usable measurement(s); a refit needs at least 3", kept.len()));
    }
    // Systematic error per class.
    let mut by_class: BTreeMap<Bottleneck, Vec<f64>> = BTreeMap::new();
    for &i in &kept {
        let (p, b) = before[i].expect("kept");
        by_class.entry(b).or_default().push((programs[i].1.measured_ms / p).ln());
    }
    let mut worst: Option<(Bottleneck, f64, f64)> = None;
    for (b, logs) in by_class.iter().filter(|(b, _)| class.is_none_or(|c| c == **b)) {
        if logs.len() < 3 {
            continue;
        }
        let mut s = logs.clone();
        s.sort_by(f64::total_cmp);
        let median = s[s.len() / 2];
        let same_sign = logs.iter().filter(|l| l.signum() == median.signum()).count() as f64 / logs.len() as f64;
        if median.abs() > 1.1f64.ln() && same_sign >= 0.75 {
            let weight = median.abs() * logs.len() as f64;
            if worst.is_none_or(|(_, _, w)| weight > w) {
                worst = Some((*b, median, weight));
            }
        }
    }
    let Some((class, median, _)) = worst else {
        return Err(match class {
            Some(c) => format!(
                "the bucket's class, {c}, is not systematically mispredicted over the {} timed run(s) the model predicts {c}-bound ({} of them; a refit needs 3+ with 75% agreeing and the median off by more than 10%)",
                kept.len(),
                by_class.get(&c).map_or(0, Vec::len)
            ),
            None => "no bottleneck class is systematically mispredicted (3+ measurements, 75% agreeing, median off by more than 10%)".into(),
        });
    };
    let params = class_params(class);
    let apply = |f: f64, note: &str| -> Result<String, String> {
        let mut t = text.to_string();
        for (name, scale) in params {
            let p = cal.params.get(*name).ok_or_else(|| format!("the calibration has no `{name}`"))?;
            let v = match scale {
                Scale::Rate => p.value / f,
                Scale::Latency => p.value * f,
                Scale::Fraction => (p.value / f).min(1.0),
            };
            t = set_param(&t, name, v, &format!("{} (was {}; {note})", p.source.split(" (was ").next().unwrap_or(&p.source), fmt_num(p.value)))?;
        }
        Ok(t)
    };
    let meas: Vec<f64> = kept.iter().map(|i| programs[*i].1.measured_ms).collect();
    let score = |cal: &Calibration| -> Option<(f64, Vec<f64>)> {
        let pred = predict(cal, &programs);
        let p: Vec<f64> = kept.iter().map(|i| pred[*i].map(|x| x.0)).collect::<Option<Vec<f64>>>()?;
        let err = p.iter().zip(&meas).map(|(a, b)| (a / b).ln().abs()).sum::<f64>() / p.len() as f64;
        Some((err, p))
    };
    // Log-spaced grid around the class's median ratio, then a finer one around the best.
    let mut best: Option<(f64, f64, Vec<f64>)> = None;
    let try_f = |f: f64, best: &mut Option<(f64, f64, Vec<f64>)>| {
        if let Ok(t) = apply(f, "") {
            if let Ok(c) = Calibration::from_toml_str(&file, &t) {
                if let Some((e, p)) = score(&c) {
                    if best.as_ref().is_none_or(|(be, _, _)| e < *be - 1e-12) {
                        *best = Some((e, f, p));
                    }
                }
            }
        }
    };
    for i in -24..=24 {
        try_f((median + i as f64 * median.abs().max(0.1) / 12.0).exp(), &mut best);
    }
    try_f(1.0, &mut best);
    if let Some((_, f0, _)) = best.clone() {
        for i in -10..=10 {
            try_f(f0 * (i as f64 * 0.01).exp(), &mut best);
        }
    }
    let (_, factor, after_pred) = best.ok_or("no factor gives predictions for every measurement")?;
    let before_pred: Vec<f64> = kept.iter().map(|i| before[*i].expect("kept").0).collect();
    let (acc_before, acc_after) = (accuracy(&before_pred, &meas), accuracy(&after_pred, &meas));
    if acc_after.mape >= acc_before.mape {
        return Err(format!("refitting {} does not improve the error (MAPE {:.1}% before, {:.1}% after)", class.as_str(), acc_before.mape, acc_after.mape));
    }
    let note = format!("refit by cake-evolve-compiler calibrate: {} time ×{:.4} over {} measurements, {fitted_on}", class.as_str(), factor, kept.len());
    let new_text = set_meta(&apply(factor, &note)?, fitted_on, &acc_after);
    Calibration::from_toml_str(&file, &new_text).map_err(|e| format!("the refitted file does not load: {e}"))?;
    let new_cal = Calibration::from_toml_str(&file, &new_text).map_err(|e| e.to_string())?;
    let changed = params
        .iter()
        .map(|(n, _)| format!("{n}: {} -> {}", fmt_num(cal.params[*n].value), fmt_num(new_cal.params[*n].value)))
        .collect();
    Ok((
        CalibrationDraft {
            target: target.to_string(),
            class: class.as_str().to_string(),
            class_ratio: Some(round4(median.exp())),
            factor: Some(round4(factor)),
            params: changed,
            before: acc_before,
            after: acc_after,
            skipped,
            fits: Vec::new(),
        },
        new_text,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!((mape(&[110.0, 90.0], &[100.0, 100.0]) - 10.0).abs() < 1e-9);
        assert_eq!(top_k_recall(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 4.0], 2), 0.5);
    }

    #[test]
    fn set_param_rewrites_value_and_source() {
        let t = "[param.a]\nvalue = 1\nunit = \"ns\"\nsource = \"x\"\n\n[param.b]\nvalue = 2\n";
        let out = set_param(t, "b", 4.0, "fit").unwrap();
        assert!(out.contains("[param.b]\nvalue = 4\n"), "{out}");
        assert!(out.contains("[param.a]\nvalue = 1\n"));
        assert!(set_param(t, "c", 1.0, "").is_err());
    }
}
