//! A `cost_model.misprediction` bucket's implicated cost-model term, and its refit.
//!
//! Scaling a whole bottleneck class (`calibrate::propose_calibration`) moves every parameter of
//! the class, the right one and the innocent ones alike. A bucket usually implicates one term:
//! the parameter the bucket's runs depend on and the other runs do not. This module finds it from
//! the cost model itself, with no table of which term belongs to which kernel:
//!
//! 1. **Still wrong.** The bucket's runs are predicted with the current calibration; they must be
//!    systematically off (3+ runs, three quarters agreeing in sign, median off by more than 10%),
//!    or there is nothing to refit (the model may have learned the class since the runs).
//! 2. **On the path.** For every fitted parameter (rates, latencies, fractions, issue slots — not
//!    the device's capacities and counts, which are read off it), its elasticity on a run is
//!    `d ln(predicted) / d ln(value)`, by a step of ×2 and of ×1/2 (the larger). A parameter is a
//!    candidate when its mean elasticity over the bucket's runs is at least [`MIN_ELASTICITY`].
//!    A `provisional` parameter (an assumption, never measured) may sit far from where its term
//!    binds, where a step of two shows nothing: where its bench has runs, it is also a candidate
//!    when moving it from the assumption to the value the bench fits shifts the bucket's
//!    predictions as far as a step of two shifts them at [`MIN_ELASTICITY`].
//! 3. **Explains the bucket, spares the rest, measured where it can be.** Each candidate alone is
//!    set to the value its bench fits, where the target's microbenchmark suite has a bench for it
//!    with runs (timed on this machine's GPU, or a saved run), else moved over a log grid
//!    (×1/16..×16). It explains the bucket when it cuts the bucket's error by at least
//!    [`MIN_BUCKET_GAIN`] and leaves the other runs' mean |log error| within [`REST_TOLERANCE`]
//!    of before. The implicated term is a measured one that explains it, else the one of least
//!    error over all the fit runs: the bucket alone often cannot tell two terms apart (a TMA
//!    stage's fixed latency from its bytes' arrival rate), a probe that isolates one can.
//!    No candidate may throw a microbenchmark off: every bench run committed with a calibration
//!    (`suite_runs`) keeps its |log error| within [`BENCH_TOLERANCE`] of now (each run: a bench's
//!    mean would let one sensitive run, the one that isolates the term, drown among the others).
//! 4. **Fitted and judged.** A measured term is fitted on its bench's runs; another on the
//!    bucket's runs together with the others (`microbench::fit_param`, the suite's own fit).
//!    Either way the refit is judged on held-out runs it never saw.

use std::collections::BTreeMap;

use crate::calibrate::{judge_held_out, set_param, validated, CalibrationDraft, Measurement};
use crate::microbench::{log_error, BenchMeasurement};
use cake::cost::Calibration;

/// Units of the device's properties (capacities and counts): read off the device, never refitted.
const DEVICE_PROPERTY_UNITS: &[&str] = &["count", "bytes", "registers per thread"];
/// A parameter moves a run's prediction by at least this share of its own change to be on the
/// run's path (0.1: a 10% change in the value moves the time by 1% or more).
pub const MIN_ELASTICITY: f64 = 0.1;
/// The implicated term must cut the bucket's mean |log error| by at least this fraction.
pub const MIN_BUCKET_GAIN: f64 = 0.25;
/// The other runs' mean |log error| may grow by at most this much (0.01: 1% on average).
pub const REST_TOLERANCE: f64 = 0.01;
/// A microbenchmark run's |log error| may grow by at most this (ln 1.1: 10% further off): a refit
/// that buys the bucket with a probe's accuracy is of the wrong term.
pub const BENCH_TOLERANCE: f64 = 0.0953;
/// The elasticity step: the value ×2 and ×1/2.
const STEP: f64 = 2.0;

/// The term a bucket implicates, with what moving it alone does.
#[derive(Clone, Debug)]
pub struct Implicated {
    pub param: String,
    /// Mean elasticity over the bucket's runs.
    pub elasticity: f64,
    /// Median measured/predicted of the bucket's runs under the current calibration.
    pub bucket_ratio: f64,
    /// Mean |log error| of the bucket's runs, and of the others, before and at the chosen value.
    pub bucket_error: (f64, f64),
    pub rest_error: (f64, f64),
    /// The value's factor at the chosen point (the bench's fit, or the grid's best).
    pub grid_factor: f64,
    /// Candidates considered (elasticity over the bucket at least MIN_ELASTICITY), with their
    /// elasticity, for the proposal's record.
    pub candidates: Vec<(String, f64)>,
    /// The runs of the term's bench, when it was measured: its refit is fitted on them.
    pub bench: Option<BenchRuns>,
}

/// Where the implicated term's refit takes its times from.
#[derive(Clone, Debug)]
pub struct BenchRuns {
    pub bench: String,
    pub gpu: String,
    pub runs: Vec<Measurement>,
}

/// Find the term a bucket implicates. `members` are the bucket's runs (the fit side), `rest` the
/// store's other fit runs of the same target.
/// `guard` holds the suite's measured bench runs (`suite_runs`): no candidate may throw one of
/// them off. `bench_for(param)` gives the runs of the suite's bench for a parameter, where there
/// are any.
pub fn implicate(target: &str, text: &str, members: &[Measurement], rest: &[Measurement], guard: &BenchGuard, bench_for: &dyn Fn(&str) -> Option<BenchRuns>) -> Result<Implicated, String> {
    let file = format!("calibration/{target}.toml");
    let cal = Calibration::from_toml_str(&file, text).map_err(|e| e.to_string())?;
    let mut skipped = Vec::new();
    let vm = validated(target, members, &mut skipped);
    let vr = validated(target, rest, &mut skipped);
    let predict = |c: &Calibration, v: &[(cake::verify::Validated, &Measurement)]| cake::cost::accuracy::predictions(c, v);
    let base_m = predict(&cal, &vm);
    // The bucket's runs the model predicts now.
    let keep: Vec<usize> = (0..vm.len()).filter(|i| base_m[*i].is_some()).collect();
    if keep.len() < 3 {
        return Err(format!("the cost model predicts {} of the bucket's runs; finding its term needs at least 3", keep.len()));
    }
    let vm: Vec<_> = keep.iter().map(|i| (vm[*i].0.clone(), vm[*i].1)).collect();
    let base_m: Vec<Option<f64>> = keep.iter().map(|i| base_m[*i]).collect();
    let base_r = predict(&cal, &vr);
    let keep_r: Vec<usize> = (0..vr.len()).filter(|i| base_r[*i].is_some()).collect();
    let vr: Vec<_> = keep_r.iter().map(|i| (vr[*i].0.clone(), vr[*i].1)).collect();
    let base_r: Vec<Option<f64>> = keep_r.iter().map(|i| base_r[*i]).collect();

    // 1. Still systematically off.
    let mut logs: Vec<f64> = base_m.iter().zip(&vm).map(|(p, (_, m))| (m.measured_ms / p.expect("kept")).ln()).collect();
    logs.sort_by(f64::total_cmp);
    let median = logs[logs.len() / 2];
    let agree = logs.iter().filter(|l| l.signum() == median.signum()).count() as f64 / logs.len() as f64;
    if median.abs() <= 1.1f64.ln() || agree < 0.75 {
        return Err(format!(
            "the current model predicts the bucket's {} run(s) with median measured/predicted {:.3} ({:.0}% agreeing in sign): not systematically off (a refit needs the median off by more than 10% and 75% agreeing)",
            logs.len(),
            median.exp(),
            agree * 100.0
        ));
    }
    let bucket_before = log_error(&base_m, &vm).expect("kept");
    let rest_before = log_error(&base_r, &vr).unwrap_or(0.0);

    // What each parameter's bench fits, asked of `bench_for` once (it may time the bench on a GPU).
    let fits = std::cell::RefCell::new(BTreeMap::<String, Option<(f64, BenchRuns)>>::new());
    let bench_fit = |name: &str| -> Option<(f64, BenchRuns)> {
        fits.borrow_mut().entry(name.to_string()).or_insert_with(|| bench_value(target, &file, text, name, bench_for)).clone()
    };

    // 2. Candidates: fitted parameters on the bucket's path.
    let mut candidates: Vec<(String, f64)> = Vec::new();
    for (name, p) in &cal.params {
        if DEVICE_PROPERTY_UNITS.contains(&p.unit.as_str()) || !(p.value > 0.0) {
            continue;
        }
        // Both ways, by a factor of two: the model's max/min terms make a parameter count only
        // once it binds, so a rate set too high shows no elasticity upwards and a small step
        // downwards may not reach its kink.
        let mut e = 0.0f64;
        let mut ok = true;
        for step in [STEP, 1.0 / STEP] {
            let v = p.value * step;
            if p.unit == "fraction" && v > 1.0 {
                continue;
            }
            let Ok(t) = set_param(text, name, v, "elasticity step") else { continue };
            let Ok(c) = Calibration::from_toml_str(&file, &t) else { continue };
            let moved = predict(&c, &vm);
            let mut sum = 0.0;
            for (a, b) in moved.iter().zip(&base_m) {
                match (a, b) {
                    (Some(a), Some(b)) => sum += (a / b).ln() / step.ln(),
                    _ => ok = false,
                }
            }
            let side = sum / vm.len() as f64;
            if side.abs() > e.abs() {
                e = side;
            }
        }
        if ok && e.abs() >= MIN_ELASTICITY {
            candidates.push((name.clone(), crate::calibrate::round4(e)));
        } else if p.provisional {
            // An assumption may sit far from where its term binds, where a step of two shows
            // nothing: the move to what its bench measures qualifies it when it shifts the
            // bucket's predictions as far as a step of two does at MIN_ELASTICITY.
            if let Some((v, _)) = bench_fit(name) {
                if let Some((e, shift)) = bench_shift(&file, text, name, p.value, v, &vm, &base_m) {
                    if shift.abs() >= MIN_ELASTICITY * STEP.ln() {
                        candidates.push((name.clone(), crate::calibrate::round4(e)));
                    }
                }
            }
        }
    }
    if candidates.is_empty() {
        return Err(format!("no fitted parameter moves the bucket's predictions by {MIN_ELASTICITY} of its own change: the term the bucket needs is not in the model (write a probe for it, calibration/microbench/{target}/suite.toml [[unfitted]])"));
    }

    // 3. Each candidate alone: at the value its bench fits, where the bench has runs, else over a
    // log grid. The implicated term explains the bucket and spares the rest; a measured one is
    // preferred to one fitted on the runs (the bucket cannot tell a stage's fixed latency from
    // its bytes' arrival rate, say; a probe that isolates one can), then the least total error.
    let mut best: Option<(bool, f64, Implicated)> = None;
    // The candidate that would have explained the bucket but for a microbenchmark it throws off.
    let mut thrown: Option<(String, String, f64)> = None;
    let total = |bm: f64, br: f64| (bm * vm.len() as f64 + br * vr.len() as f64) / (vm.len() + vr.len()) as f64;
    for (name, e) in &candidates {
        let v0 = cal.params[name].value;
        let fraction = cal.params[name].unit == "fraction";
        let mut tries: Vec<(f64, Option<BenchRuns>)> = Vec::new();
        if let Some((v, b)) = bench_fit(name) {
            tries.push((v, Some(b)));
        }
        if tries.is_empty() {
            for k in -8i32..=8 {
                let f = (16f64.ln() * k as f64 / 8.0).exp();
                tries.push((if fraction { (v0 * f).min(1.0) } else { v0 * f }, None));
            }
        }
        for (v, bench) in tries {
            if (v / v0 - 1.0).abs() < 1e-9 {
                continue;
            }
            let Ok(t) = set_param(text, name, v, "candidate") else { continue };
            let Ok(c) = Calibration::from_toml_str(&file, &t) else { continue };
            let (Some(bm), Some(br)) = (log_error(&predict(&c, &vm), &vm), log_error(&predict(&c, &vr), &vr)) else { continue };
            if bm > bucket_before * (1.0 - MIN_BUCKET_GAIN) || br > rest_before + REST_TOLERANCE {
                continue;
            }
            if let Some((g, grew)) = guard.thrown_off(&c) {
                if thrown.as_ref().is_none_or(|(_, _, w)| grew < *w) {
                    thrown = Some((name.clone(), g, grew));
                }
                continue;
            }
            let measured = bench.is_some();
            let key = (measured, total(bm, br));
            let better = best.as_ref().is_none_or(|(m, t, _)| (key.0 && !*m) || (key.0 == *m && key.1 < *t - 1e-12));
            if better {
                let imp = Implicated {
                    param: name.clone(),
                    elasticity: *e,
                    bucket_ratio: crate::calibrate::round4(median.exp()),
                    bucket_error: (bucket_before, bm),
                    rest_error: (rest_before, br),
                    grid_factor: v / v0,
                    candidates: Vec::new(),
                    bench,
                };
                best = Some((key.0, key.1, imp));
            }
        }
    }
    let (_, _, mut best) = best.ok_or_else(|| {
        let thrown = thrown.as_ref().map_or(String::new(), |(p, g, grew)| format!(" ({p} would, but it throws microbenchmark `{g}` off: a run's |log error| grows by {grew:.3})"));
        format!(
            "no single parameter explains the bucket: of the {} on its path ({}), none cuts its error by {:.0}% without raising the other {} run(s)' by more than {REST_TOLERANCE} or any microbenchmark run's by more than {BENCH_TOLERANCE:.3}{thrown}",
            candidates.len(),
            candidates.iter().map(|(n, e)| format!("{n} {e:+.2}")).collect::<Vec<_>>().join(", "),
            MIN_BUCKET_GAIN * 100.0,
            vr.len()
        )
    })?;
    best.candidates = candidates;
    Ok(best)
}

/// The value of `name` its bench's runs fit, with those runs (`None` without runs or a fit).
fn bench_value(target: &str, file: &str, text: &str, name: &str, bench_for: &dyn Fn(&str) -> Option<BenchRuns>) -> Option<(f64, BenchRuns)> {
    let b = bench_for(name)?;
    let mut skipped = Vec::new();
    let runs = validated(target, &b.runs, &mut skipped);
    let (t, _) = crate::microbench::fit_param(file, text, name, &b.bench, &runs, "bench fit").ok()?;
    let v = Calibration::from_toml_str(file, &t).ok()?.params[name].value;
    Some((v, b))
}

/// The bucket's mean elasticity to `name` between `v0` and `v`, and the mean log shift of its
/// predictions that move makes (`None` when they are the same value or a run is not predicted).
fn bench_shift(file: &str, text: &str, name: &str, v0: f64, v: f64, vm: &[(cake::verify::Validated, &Measurement)], base_m: &[Option<f64>]) -> Option<(f64, f64)> {
    let step = (v / v0).ln();
    if step.abs() < 1e-6 {
        return None;
    }
    let c = Calibration::from_toml_str(file, &set_param(text, name, v, "bench fit").ok()?).ok()?;
    let moved = cake::cost::accuracy::predictions(&c, vm);
    let mut sum = 0.0;
    for (a, b) in moved.iter().zip(base_m) {
        sum += ((*a)? / (*b)?).ln();
    }
    let shift = sum / vm.len() as f64;
    Some((shift / step, shift))
}

/// The suite's measured bench runs, by bench, with each run's |log error| under a base
/// calibration: a new calibration may not raise any of them by more than [`BENCH_TOLERANCE`].
pub struct BenchGuard<'m> {
    groups: Vec<(&'m str, Vec<(cake::verify::Validated, &'m Measurement)>)>,
    before: Vec<Vec<Option<f64>>>,
}

impl<'m> BenchGuard<'m> {
    pub fn new(target: &str, base: &Calibration, benches: &'m [BenchMeasurement]) -> BenchGuard<'m> {
        let mut by_bench: BTreeMap<&str, Vec<&Measurement>> = BTreeMap::new();
        for b in benches {
            by_bench.entry(b.bench.as_str()).or_default().push(&b.m);
        }
        let mut skipped = Vec::new();
        let groups: Vec<_> = by_bench.into_iter().map(|(b, ms)| (b, validated(target, ms, &mut skipped))).filter(|(_, v)| !v.is_empty()).collect();
        let mut g = BenchGuard { groups, before: Vec::new() };
        g.before = g.errors(base);
        g
    }

    /// Per bench, each run's |log error| under `c` (None where the model cannot predict it).
    fn errors(&self, c: &Calibration) -> Vec<Vec<Option<f64>>> {
        self.groups
            .iter()
            .map(|(_, v)| cake::cost::accuracy::predictions(c, v).iter().zip(v).map(|(p, (_, m))| p.map(|p| (p / m.measured_ms).ln().abs())).collect())
            .collect()
    }

    /// The first bench `c` throws off, with how much the |log error| of its run furthest thrown
    /// grows.
    pub fn thrown_off(&self, c: &Calibration) -> Option<(String, f64)> {
        self.errors(c).into_iter().zip(&self.before).zip(&self.groups).find_map(|((after, before), (g, _))| {
            let grew = after.iter().zip(before).filter_map(|(a, b)| Some((*a)? - (*b)?)).fold(f64::NEG_INFINITY, f64::max);
            (grew > BENCH_TOLERANCE).then(|| (g.to_string(), grew))
        })
    }
}

/// Refit the implicated term — from its bench's runs when it was measured, else from the bucket's
/// runs and the rest of the fit side — and judge the new file on the held-out runs.
pub fn refit_term(target: &str, text: &str, implicated: &Implicated, fit: &[Measurement], held_out: &[Measurement], fitted_on: &str) -> Result<(CalibrationDraft, String), String> {
    let file = format!("calibration/{target}.toml");
    let mut skipped = Vec::new();
    let (runs, label, note) = match &implicated.bench {
        Some(b) => (validated(target, &b.runs, &mut skipped), b.bench.clone(), format!("microbench `{}` ({} run(s) on {}), the term a misprediction bucket implicated, fitted by cake-evolve-compiler propose", b.bench, b.runs.len(), b.gpu)),
        None => (validated(target, fit, &mut skipped), "bucket".to_string(), format!("refit from the timed runs of a misprediction bucket that implicated it ({fitted_on}), by cake-evolve-compiler propose")),
    };
    let (new_text, pf) = crate::microbench::fit_param(&file, text, &implicated.param, &label, &runs, &note)?;
    let cal = Calibration::from_toml_str(&file, text).map_err(|e| e.to_string())?;
    let class = cal.params.get(&implicated.param).map(|_| format!("term {}", implicated.param)).unwrap_or_default();
    let draft = CalibrationDraft {
        target: target.to_string(),
        class,
        class_ratio: Some(implicated.bucket_ratio),
        factor: Some(crate::calibrate::round4(pf.after / pf.before)),
        params: vec![format!("{}: {} -> {}", pf.param, crate::calibrate::fmt_num(pf.before), crate::calibrate::fmt_num(pf.after))],
        before: Default::default(),
        after: Default::default(),
        skipped,
        fits: vec![pf],
    };
    let draft = judge_held_out(target, text, draft, &new_text, held_out)?;
    if draft.after.mape > draft.before.mape {
        return Err(format!(
            "refitting {} makes the held-out runs worse (MAPE {:.1}% -> {:.1}%): the term is not the bucket's cause",
            implicated.param, draft.before.mape, draft.after.mape
        ));
    }
    let new_text = crate::calibrate::set_meta(&new_text, fitted_on, &draft.after);
    Ok((draft, new_text))
}

/// Every microbenchmark run measured on a GPU and committed with a calibration
/// (`calibration/runs/<target>-*.json`, the suite part; not the corpus runs a refit used, bench
/// `refit`), the newest of each program and shape: the probes a term refit must not throw off.
pub fn suite_runs(root: &std::path::Path, target: &str) -> Vec<BenchMeasurement> {
    let mut newest: BTreeMap<(String, String), (u64, BenchMeasurement)> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(root.join("calibration/runs")) else { return Vec::new() };
    let mut files: Vec<std::path::PathBuf> = dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let Ok(run) = serde_json::from_str::<crate::microbench::SavedRun>(&text) else { continue };
        if run.target != target {
            continue;
        }
        for b in run.suite.into_iter().filter(|b| b.bench != "refit") {
            let key = (b.bench.clone(), b.m.name.clone());
            if newest.get(&key).is_none_or(|(at, _)| run.created_unix >= *at) {
                newest.insert(key, (run.created_unix, b));
            }
        }
    }
    newest.into_values().map(|(_, b)| b).collect()
}

/// Where `propose` takes the implicated term's microbenchmark times from.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum TermBenches {
    /// The bucket's own runs only (no GPU work).
    #[default]
    Records,
    /// A saved suite run (`calibrate --save-measurements`): the term's bench runs in it.
    Saved(std::path::PathBuf),
    /// Time the term's benches on this machine's GPU with `cake run` (this `cake` binary, or the one
    /// beside this program); the bucket's runs where there is no GPU.
    Gpu(Option<std::path::PathBuf>),
}

/// The runs of the benches in `target`'s suite that fit `param`, from `source`; `None` with the
/// reason when there are none (the refit then uses the bucket's runs).
pub fn bench_runs(source: &TermBenches, root: &std::path::Path, target: &str, param: &str) -> Result<BenchRuns, String> {
    use crate::microbench::{run_suite, CakeRunner, RunSuiteError, SavedRun, Suite};
    let path = Suite::default_path(root, target);
    let suite = Suite::load(&path)?;
    let benches: Vec<_> = suite.benches.iter().filter(|b| b.fits.iter().any(|f| f == param)).cloned().collect();
    if benches.is_empty() {
        return Err(format!("no bench of {} fits `{param}` (a probe that isolates it would let a GPU measure it)", path.strip_prefix(root).unwrap_or(&path).display()));
    }
    let names: Vec<String> = benches.iter().map(|b| b.name.clone()).collect();
    let from = |run: SavedRun, origin: &str| -> Result<BenchRuns, String> {
        let runs: Vec<Measurement> = run.suite.into_iter().filter(|m| names.contains(&m.bench)).map(|m| m.m).collect();
        if runs.is_empty() {
            return Err(format!("{origin} has no timed run of bench {}", names.join(", ")));
        }
        Ok(BenchRuns { bench: names.join(", "), gpu: run.gpu, runs })
    };
    match source {
        TermBenches::Records => Err(format!("bench {} fits it; no GPU run was asked for (`propose --term-benches auto|FILE`)", names.join(", "))),
        TermBenches::Saved(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read the saved run {}: {e}", file.display()))?;
            let run: SavedRun = serde_json::from_str(&text).map_err(|e| format!("{}: not a saved calibration run: {e}", file.display()))?;
            if run.target != target {
                return Err(format!("{} was measured for {}, not {target}", file.display(), run.target));
            }
            from(run, &file.display().to_string())
        }
        TermBenches::Gpu(cake) => {
            let exe = CakeRunner::locate(cake.clone())?;
            let runner = CakeRunner { exe, timeout_s: 60, deadline: std::time::Duration::from_secs(600), started: std::time::Instant::now(), verbose: false };
            let subset = Suite { path: suite.path.clone(), target: suite.target.clone(), benches, accuracy: Vec::new(), unfitted: Vec::new() };
            match run_suite(&subset, &root.join("corpus"), &runner) {
                Ok(run) => from(run, "this machine's GPU run"),
                Err(e @ RunSuiteError::NoGpu(_)) => Err(format!("bench {} fits it, but {e}", names.join(", "))),
                Err(e) => Err(e.to_string()),
            }
        }
    }
}
