//! Cake's one plotting module (issue 16): typed charts drawn as SVG strings through `plotters`.
//!
//! Three kinds, each a plain struct of the values it shows:
//! - [`Line`]: series of (x, y) points joined by lines or steps (kernel-evolution trajectories);
//! - [`Scatter`]: point series with the y = x line (cost model predicted vs measured, a
//!   calibration before and after);
//! - [`Bars`]: grouped bars, one group per category and one bar per series (corpus results per
//!   family, ratios against peers).
//!
//! [`svg`] draws one or more charts side by side into one SVG document. The output depends only
//! on the input (no fonts are loaded: text is written as `<text>` and laid out by the viewer), so
//! it can be committed and compared. Errors are [`PlotError`]s with a code and what to do.

use std::fmt;

use plotters::coord::Shift;
use plotters::prelude::*;

/// One named series of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points }
    }
}

/// A line chart; with `step`, each point holds its value until the next x (a best-so-far curve).
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub step: bool,
}

/// A scatter of point series with the y = x line over their common range.
#[derive(Clone, Debug, PartialEq)]
pub struct Scatter {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Logarithmic axes (every value must then be > 0): times that span decades.
    pub log: bool,
}

/// One series of a grouped bar chart: a value per group, in the order of [`Bars::groups`].
#[derive(Clone, Debug, PartialEq)]
pub struct BarSeries {
    pub name: String,
    pub values: Vec<f64>,
}

/// A grouped bar chart: for each group, one bar per series side by side.
#[derive(Clone, Debug, PartialEq)]
pub struct Bars {
    pub title: String,
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<BarSeries>,
    /// A horizontal reference line (1.0 for a ratio against a peer), if any.
    pub reference: Option<f64>,
}

/// One chart of a figure.
#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    Line(Line),
    Scatter(Scatter),
    Bars(Bars),
}

/// Why a chart could not be drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotError {
    /// `D001` nothing to draw, `D002` a value that is not finite (or not > 0 on a log axis),
    /// `D003` a bar series whose length differs from the groups', `D004` the backend failed.
    pub code: &'static str,
    pub message: String,
    pub help: &'static str,
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: {}\n  = help: {}", self.code, self.message, self.help)
    }
}

impl std::error::Error for PlotError {}

/// The series colours, in order (the "tab10" palette, chosen to be told apart when printed).
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A tick label: at most 4 significant digits, no trailing zeros (`100`, `0.25`, `1.5e9`).
fn tick(v: &f64) -> String {
    if *v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.2e}");
    }
    let digits = (3 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn backend(e: impl fmt::Display) -> PlotError {
    PlotError { code: "D004", message: format!("the SVG backend failed: {e}"), help: "report this with the chart's input; the values were checked before drawing" }
}

/// Draw `charts` side by side into one `width` × `height` SVG document.
pub fn svg(charts: &[Chart], width: u32, height: u32) -> Result<String, PlotError> {
    if charts.is_empty() {
        return Err(PlotError { code: "D001", message: "no chart to draw".into(), help: "give at least one chart" });
    }
    for c in charts {
        check(c)?;
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(backend)?;
        for (area, c) in root.split_evenly((1, charts.len())).iter().zip(charts) {
            match c {
                Chart::Line(l) => draw_line(area, l)?,
                Chart::Scatter(s) => draw_scatter(area, s)?,
                Chart::Bars(b) => draw_bars(area, b)?,
            }
        }
        root.present().map_err(backend)?;
    }
    Ok(out)
}

/// Every value finite (and > 0 on a log axis), something to draw, bar lengths matching.
fn check(c: &Chart) -> Result<(), PlotError> {
    let (title, series, log): (&str, Vec<(&str, Vec<(f64, f64)>)>, bool) = match c {
        Chart::Line(l) => (&l.title, l.series.iter().map(|s| (s.name.as_str(), s.points.clone())).collect(), false),
        Chart::Scatter(s) => (&s.title, s.series.iter().map(|s| (s.name.as_str(), s.points.clone())).collect(), s.log),
        Chart::Bars(b) => {
            for s in &b.series {
                if s.values.len() != b.groups.len() {
                    return Err(PlotError {
                        code: "D003",
                        message: format!("bar series `{}` of chart `{title}` has {} value(s) for {} group(s)", s.name, s.values.len(), b.groups.len(), title = b.title),
                        help: "give one value per group, in the groups' order (0 for none)",
                    });
                }
            }
            (&b.title, b.series.iter().map(|s| (s.name.as_str(), s.values.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect())).collect(), false)
        }
    };
    if series.iter().all(|(_, p)| p.is_empty()) {
        return Err(PlotError { code: "D001", message: format!("chart `{title}` has no points"), help: "leave the chart out when there is nothing to show" });
    }
    for (name, pts) in &series {
        if let Some((x, y)) = pts.iter().find(|(x, y)| !x.is_finite() || !y.is_finite() || (log && (*x <= 0.0 || *y <= 0.0))) {
            return Err(PlotError {
                code: "D002",
                message: format!("series `{name}` of chart `{title}` has the point ({x}, {y}){}", if log { ", not finite and > 0 on its log axes" } else { ", not finite" }),
                help: "leave out points that were not measured (NaN, ∞), or draw the chart with linear axes",
            });
        }
    }
    Ok(())
}

/// [lo, hi] of `v`, widened so that a single value still spans a range.
fn range(v: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-12 {
        hi = lo + if lo.abs() > 1e-12 { lo.abs() * 0.1 } else { 1.0 };
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad)
}

fn draw_line(area: &DrawingArea<SVGBackend<'_>, Shift>, l: &Line) -> Result<(), PlotError> {
    let pts = || l.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = range(pts().map(|p| p.0), false);
    let (y0, y1) = range(pts().map(|p| p.1), true);
    let mut chart = ChartBuilder::on(area)
        .caption(&l.title, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(backend)?;
    chart.configure_mesh().x_desc(&l.x_label).y_desc(&l.y_label).x_label_formatter(&tick).y_label_formatter(&tick).draw().map_err(backend)?;
    for (i, s) in l.series.iter().enumerate() {
        let c = colour(i);
        let mut path: Vec<(f64, f64)> = Vec::new();
        for (k, p) in s.points.iter().enumerate() {
            if l.step && k > 0 {
                path.push((p.0, s.points[k - 1].1));
            }
            path.push(*p);
        }
        chart.draw_series(LineSeries::new(path, c.stroke_width(2))).map_err(backend)?.label(&s.name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw().map_err(backend)?;
    Ok(())
}

fn draw_scatter(area: &DrawingArea<SVGBackend<'_>, Shift>, s: &Scatter) -> Result<(), PlotError> {
    let all = || s.series.iter().flat_map(|x| x.points.iter()).flat_map(|p| [p.0, p.1]);
    // One range for both axes: the y = x line is the diagonal, and distance from it is error.
    // Points are translucent: a later series does not hide an earlier one where they agree.
    let (lo, hi) = if s.log {
        let (a, b) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
        (a / 1.5, b * 1.5)
    } else {
        range(all(), false)
    };
    let mut b = ChartBuilder::on(area);
    b.caption(&s.title, ("sans-serif", 15)).margin(12).x_label_area_size(36).y_label_area_size(56);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            // Few labels and no minor grid: a log axis otherwise crowds each decade's end.
            chart
                .configure_mesh()
                .x_desc(&s.x_label)
                .y_desc(&s.y_label)
                .x_labels(6)
                .y_labels(6)
                .light_line_style(WHITE)
                .x_label_formatter(&tick)
                .y_label_formatter(&tick)
                .draw()
                .map_err(backend)?;
            chart.draw_series(LineSeries::new(vec![(lo, lo), (hi, hi)], BLACK.mix(0.5))).map_err(backend)?.label("y = x").legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.mix(0.5)));
            for (i, ser) in s.series.iter().enumerate() {
                let c = colour(i);
                chart.draw_series(ser.points.iter().map(|p| Circle::new(*p, 4, c.mix(0.6).filled()))).map_err(backend)?.label(&ser.name).legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
            }
            chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperLeft).draw().map_err(backend)?;
        }};
    }
    if s.log {
        body!(b.build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale()).map_err(backend)?);
    } else {
        body!(b.build_cartesian_2d(lo..hi, lo..hi).map_err(backend)?);
    }
    Ok(())
}

fn draw_bars(area: &DrawingArea<SVGBackend<'_>, Shift>, b: &Bars) -> Result<(), PlotError> {
    let n = b.groups.len().max(1);
    let k = b.series.len().max(1);
    let (y0, y1) = range(b.series.iter().flat_map(|s| s.values.iter().copied()).chain(b.reference), true);
    // Headroom above the tallest bar for the legend in the upper right.
    let y1 = y0 + (y1 - y0) * 1.25;
    let groups = b.groups.clone();
    let mut chart = ChartBuilder::on(area)
        .caption(&b.title, ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, y0..y1)
        .map_err(backend)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x: &f64| {
            // Group i is centred on x = i; other tick positions stay blank.
            let i = x.round();
            if (x - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < groups.len() {
                groups[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(&b.y_label)
        .y_label_formatter(&tick)
        .draw()
        .map_err(backend)?;
    let width = 0.8 / k as f64;
    for (j, s) in b.series.iter().enumerate() {
        let c = colour(j);
        let bars = s.values.iter().enumerate().map(move |(i, v)| {
            let x = i as f64 - 0.4 + j as f64 * width;
            Rectangle::new([(x, 0.0f64.max(y0)), (x + width * 0.95, *v)], c.filled())
        });
        chart.draw_series(bars).map_err(backend)?.label(&s.name).legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    if let Some(r) = b.reference {
        chart.draw_series(LineSeries::new(vec![(-0.5, r), (n as f64 - 0.5, r)], BLACK.mix(0.6))).map_err(backend)?.label(format!("reference {r}")).legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.mix(0.6)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw().map_err(backend)?;
    Ok(())
}
