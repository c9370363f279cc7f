//! The figures of a proposal page, drawn with `cake-plot`: for a calibration, its accuracy before
//! and after, and each fitted bench's error before against after (under the y = x line: the fit
//! helped).

use cake_plot::{BarSeries, Bars, Chart, Scatter, Series};

use crate::queue::Record;

/// (caption, SVG) of each figure `r` has; a figure that cannot be drawn is left out with its
/// error as the caption.
pub fn figures(r: &Record) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(c) = &r.calibration else { return out };
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
