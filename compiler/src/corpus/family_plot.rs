//! The corpus gate report's figure: results per family as grouped bars (pass, fail, skipped,
//! spurious), drawn with `cake-plot` into an SVG beside the markdown report, which embeds it.

use std::path::{Path, PathBuf};

use cake_plot::{BarSeries, Bars, Chart, PlotError};

use super::report::Report;

/// Pixels per family group, so that every family keeps a readable label.
const PX_PER_FAMILY: u32 = 90;

/// The figure's path beside the report: `report.md` → `report-families.svg`.
pub fn path_for(report: &Path) -> PathBuf {
    let stem = report.file_stem().map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
    report.with_file_name(format!("{stem}-families.svg"))
}

/// The per-family figure; `None` when the run has no results to draw.
pub fn svg(rep: &Report) -> Result<Option<String>, PlotError> {
    let fams = rep.families();
    if fams.is_empty() {
        return Ok(None);
    }
    let series = |name: &str, v: fn(&super::report::FamilyCounts<'_>) -> usize| BarSeries { name: name.into(), values: fams.iter().map(|f| v(f) as f64).collect() };
    let chart = Chart::Bars(Bars {
        title: "corpus gate: results per family".into(),
        y_label: "results".into(),
        groups: fams.iter().map(|f| f.family.to_string()).collect(),
        series: vec![series("pass", |f| f.pass), series("fail", |f| f.fail), series("skipped", |f| f.skipped), series("spurious", |f| f.spurious)],
        reference: None,
    });
    let width = (fams.len() as u32 * PX_PER_FAMILY).clamp(640, 4000);
    cake_plot::svg(&[chart], width, 420).map(Some)
}
