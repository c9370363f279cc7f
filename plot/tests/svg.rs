//! Each chart kind renders a well-formed SVG document with its series, deterministically, and bad
//! input is a coded error.

use cake_plot::{svg, BarSeries, Bars, Chart, Line, Scatter, Series};

/// Well-formed XML for what plotters writes: every element closed in order, attributes quoted, no
/// raw `<` or `&` in text. Returns the element names in document order.
fn elements(doc: &str) -> Vec<String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut rest = doc.trim_start();
    if rest.starts_with("<?xml") {
        rest = &rest[rest.find("?>").expect("the XML declaration closes") + 2..];
    }
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        assert!(!text.contains('>'), "a raw `>` in text: {text:?}");
        for (i, _) in text.match_indices('&') {
            let ent = &text[i..text[i..].find(';').map_or(text.len(), |e| i + e + 1)];
            assert!(["&lt;", "&gt;", "&amp;", "&quot;", "&apos;"].contains(&ent) || ent.starts_with("&#"), "a raw `&` in text: {ent:?}");
        }
        let close = open + rest[open..].find('>').expect("every tag closes");
        let tag = &rest[open + 1..close];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name.trim()), "closing tag out of order");
        } else {
            let name: String = tag.chars().take_while(|c| !c.is_whitespace() && *c != '/').collect();
            assert!(!name.is_empty(), "an empty tag name in {tag:?}");
            assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes in <{tag}>");
            names.push(name.clone());
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    assert!(rest.trim().is_empty(), "text after the root element");
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    assert_eq!(names.first().map(String::as_str), Some("svg"), "the root element is <svg>");
    names
}

fn line() -> Chart {
    Chart::Line(Line {
        title: "best so far, measured".into(),
        x_label: "GPU evaluations".into(),
        y_label: "ms".into(),
        series: vec![Series::new("kernel A", vec![(1.0, 3.0), (2.0, 2.0), (3.0, 2.0)]), Series::new("kernel B", vec![(1.0, 4.0), (3.0, 1.5)])],
        step: true,
    })
}

fn scatter(log: bool) -> Chart {
    Chart::Scatter(Scatter {
        title: "predicted vs measured".into(),
        x_label: "measured ms".into(),
        y_label: "predicted ms".into(),
        series: vec![Series::new("before", vec![(1.0, 2.0), (3.0, 1.0), (10.0, 20.0)]), Series::new("after", vec![(1.0, 1.1), (3.0, 2.9), (10.0, 9.0)])],
        log,
    })
}

fn bars() -> Chart {
    Chart::Bars(Bars {
        title: "corpus results per family".into(),
        y_label: "results".into(),
        groups: vec!["gemm".into(), "verifier-negative".into(), "attention & <co>".into()],
        series: vec![BarSeries { name: "pass".into(), values: vec![10.0, 40.0, 3.0] }, BarSeries { name: "fail".into(), values: vec![0.0, 1.0, 2.0] }],
        reference: None,
    })
}

#[test]
fn a_step_line_chart_draws_each_series_with_its_legend() {
    let doc = svg(&[line()], 600, 400).unwrap();
    let names = elements(&doc);
    // Each series: its line and its legend swatch, in its colour (the mesh is grey).
    assert!(names.iter().any(|n| n == "polyline"));
    let stroke = |rgb: &str| doc.matches(&format!("stroke=\"{rgb}\" stroke-width=\"2\"")).count();
    assert_eq!((stroke("#1F77B4"), stroke("#D62728")), (2, 2), "{doc}");
    assert!(doc.contains("kernel A") && doc.contains("kernel B") && doc.contains("GPU evaluations"));
}

#[test]
fn a_scatter_has_the_identity_line_and_a_point_per_value_on_linear_and_log_axes() {
    for log in [false, true] {
        let doc = svg(&[scatter(log)], 500, 500).unwrap();
        let names = elements(&doc);
        // 6 points and 2 legend markers.
        assert_eq!(names.iter().filter(|n| *n == "circle").count(), 8, "log = {log}");
        assert!(doc.contains("y = x") && doc.contains("before") && doc.contains("after"));
    }
}

#[test]
fn grouped_bars_draw_a_bar_per_series_and_group_and_escape_their_labels() {
    let doc = svg(&[bars()], 700, 400).unwrap();
    elements(&doc);
    assert!(doc.contains("verifier-negative") && doc.contains("attention &amp; &lt;co&gt;"), "{doc}");
    assert!(doc.contains("\npass\n") && doc.contains("\nfail\n"), "the legend");
    // 6 bars, in the two series' colours (plus a legend swatch each).
    let fill = |rgb: &str| doc.matches(&format!("fill=\"{rgb}\"")).count();
    assert_eq!(fill("#1F77B4"), 4, "pass: 3 bars and the legend swatch");
    assert_eq!(fill("#D62728"), 4, "fail: 3 bars and the legend swatch");
}

#[test]
fn panels_side_by_side_and_the_output_is_deterministic() {
    let charts = [line(), scatter(false), bars()];
    let a = svg(&charts, 1500, 400).unwrap();
    assert_eq!(a, svg(&charts, 1500, 400).unwrap());
    elements(&a);
    assert!(a.starts_with("<svg") && a.contains("width=\"1500\""));
}

#[test]
fn bad_input_is_a_coded_error() {
    assert_eq!(svg(&[], 10, 10).unwrap_err().code, "D001");
    let Chart::Scatter(mut s) = scatter(true) else { unreachable!() };
    s.series[0].points.push((0.0, 1.0));
    let e = svg(&[Chart::Scatter(s)], 500, 500).unwrap_err();
    assert_eq!(e.code, "D002");
    assert!(e.message.contains("(0, 1)") && e.message.contains("before"), "{e}");
    let Chart::Bars(mut b) = bars() else { unreachable!() };
    b.series[1].values.pop();
    let e = svg(&[Chart::Bars(b)], 500, 500).unwrap_err();
    assert_eq!(e.code, "D003");
    assert!(e.to_string().contains("`fail`") && e.to_string().contains("2 value(s) for 3 group(s)"), "{e}");
    let empty = Chart::Line(Line { title: "t".into(), x_label: String::new(), y_label: String::new(), series: vec![Series::new("s", vec![])], step: false });
    assert_eq!(svg(&[empty], 100, 100).unwrap_err().code, "D001");
}
