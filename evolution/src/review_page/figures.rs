//! The figures of a proposal page, drawn with `cake-plot`: for a calibration, predicted against
//! measured time of each accuracy run before and after (the cost model run in-process on both
//! parameter files the diff holds, over the runs the proposal commits, as the `accuracy` gate
//! judges them), its accuracy before and after, and each fitted bench's error before against
//! after (under the y = x line: the fit helped).

use cake::cost::accuracy::{predictions, validated, SavedRun};
use cake::cost::Calibration;
use cake_plot::{BarSeries, Bars, Chart, Scatter, Series};

use crate::git::FileDiff;
use crate::queue::Record;

/// Predicted against measured ms of the accuracy runs `diff` commits for `target`, under the
/// base's parameters and the proposal's; `Ok(None)` when the diff commits no runs.
pub fn predicted_vs_measured(target: &str, diff: &[FileDiff]) -> Result<Option<Chart>, String> {
    let rel = format!("calibration/{target}.toml");
    let prefix = format!("calibration/runs/{target}-");
    let runs: Vec<&FileDiff> = diff.iter().filter(|f| f.path.starts_with(&prefix) && f.path.ends_with(".json") && f.new.is_some()).collect();
    let Some(cal) = diff.iter().find(|f| f.path == rel) else { return Ok(None) };
    if runs.is_empty() {
        return Ok(None);
    }
    let parse = |bytes: &[u8]| Calibration::from_toml_str(&rel, &String::from_utf8_lossy(bytes)).map_err(|e| e.to_string());
    let new = parse(cal.new.as_deref().ok_or_else(|| format!("the proposal deletes {rel}"))?)?;
    let old = cal.old.as_deref().map(parse).transpose()?;
    let mut saved = Vec::new();
    for f in runs {
        let run: SavedRun = serde_json::from_slice(f.new.as_deref().unwrap_or_default()).map_err(|e| format!("{}: {e}", f.path))?;
        saved.push(run);
    }
    let mut skipped = Vec::new();
    let ms = validated(target, saved.iter().flat_map(|r| r.accuracy.iter()), &mut skipped);
    let pairs = |cal: &Calibration| -> Vec<(f64, f64)> { predictions(cal, &ms).into_iter().zip(&ms).filter_map(|(p, (_, m))| p.filter(|p| *p > 0.0).map(|p| (m.measured_ms, p))).collect() };
    let mut series = Vec::new();
    if let Some(old) = &old {
        series.push(Series::new("before", pairs(old)));
    }
    series.push(Series::new("after", pairs(&new)));
    Ok(Some(Chart::Scatter(Scatter {
        title: format!("predicted vs measured, {} accuracy run(s)", ms.len()),
        x_label: "measured ms".into(),
        y_label: "predicted ms".into(),
        series,
        log: true,
    })))
}

/// (caption, SVG) of each figure `r` has, `diff` being its change; a figure that cannot be drawn
/// is left out with its error as the caption.
pub fn figures(r: &Record, diff: &[FileDiff]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(c) = &r.calibration else { return out };
    match predicted_vs_measured(&c.target, diff).and_then(|ch| ch.map(|ch| cake_plot::svg(&[ch], 560, 520).map_err(|e| e.to_string())).transpose()) {
        Ok(Some(svg)) => out.push((format!("calibration of {}: each accuracy run's predicted against measured time, with the base's parameters (before) and the proposal's (after)", c.target), svg)),
        Ok(None) => {}
        Err(e) => out.push((format!("predicted vs measured: not drawn: {e}"), String::new())),
    }
    let accuracy = Chart::Bars(Bars {
        title: format!("cost-model accuracy on {} GPU corpus measurements", c.after.n),
        y_label: "score (1 is best)".into(),
        groups: vec!["Spearman".into(), format!("top-{} recall", c.after.k)],
        series: vec![
            BarSeries { name: "before".into(), values: vec![c.before.spearman, c.before.top_k_recall] },
            BarSeries { name: "after".into(), values: vec![c.after.spearman, c.after.top_k_recall] },
        ],
        reference: Some(1.0),
    });
    let mut charts = vec![accuracy];
    if !c.fits.is_empty() {
        charts.push(Chart::Scatter(Scatter {
            title: "mean |log error| per fitted bench".into(),
            x_label: "before the fit".into(),
            y_label: "after the fit".into(),
            series: vec![Series::new("bench", c.fits.iter().map(|f| (f.log_error_before, f.log_error_after)).collect())],
            log: false,
        }));
    }
    let caption = format!("calibration of {}: accuracy before and after{}", c.target, if c.fits.is_empty() { "" } else { "; each bench's error before (x) and after (y) the fit" });
    match cake_plot::svg(&charts, 520 * charts.len() as u32, 380) {
        Ok(svg) => out.push((caption, svg)),
        Err(e) => out.push((format!("{caption}: not drawn: {e}"), String::new())),
    }
    out
}
