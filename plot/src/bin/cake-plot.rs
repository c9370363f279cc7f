//! Charts from small tab-separated files (`#` comments), for the numbers of
//! `benchmarks/RESULTS.md`:
//! - `cake-plot bars DATA.tsv -o OUT.svg [--title T] [--y-label L] [--reference R]`: grouped bars
//!   from `group<TAB>series<TAB>value` lines (ratios against peers). Groups and series keep their
//!   first order; a group a series has no line for gets 0.
//! - `cake-plot scatter DATA.tsv -o OUT.svg [--log] [--title T] [--x-label L] [--y-label L]`:
//!   points with the y = x line from `series<TAB>x<TAB>y` lines (cost-model predicted against
//!   measured time).
//!
//! Exit: 0 drawn, 2 usage, input or output error.

use std::process::ExitCode;

use cake_plot::{BarSeries, Bars, Chart, Scatter, Series};

const USAGE: &str = "usage: cake-plot bars DATA.tsv -o OUT.svg [--title T] [--y-label L] [--reference R]\n       cake-plot scatter DATA.tsv -o OUT.svg [--log] [--title T] [--x-label L] [--y-label L]";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(msg) => {
            println!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<String, String> {
    let mut it = args.into_iter();
    let kind = it.next().unwrap_or_default();
    if kind != "bars" && kind != "scatter" {
        return Err(format!("error: the charts from a file are `bars` and `scatter`, not `{kind}`\n  = help: {USAGE}"));
    }
    let (mut data, mut out, mut title, mut x_label, mut y_label, mut reference, mut log) = (None, None, None, None, None, None, false);
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("error: `{flag}` needs a value\n  = help: {USAGE}"));
        match a.as_str() {
            "-o" | "--out" => out = Some(value("-o")?),
            "--title" => title = Some(value("--title")?),
            "--x-label" => x_label = Some(value("--x-label")?),
            "--y-label" => y_label = Some(value("--y-label")?),
            "--log" => log = true,
            "--reference" => {
                let v = value("--reference")?;
                reference = Some(v.parse::<f64>().map_err(|e| format!("error: `--reference {v}`: {e}\n  = help: give a number, e.g. 1 for parity with the peer"))?);
            }
            _ if data.is_none() && !a.starts_with('-') => data = Some(a),
            _ => return Err(format!("error: unexpected argument `{a}`\n  = help: {USAGE}")),
        }
    }
    let (Some(data), Some(out)) = (data, out) else { return Err(format!("error: give the data file and `-o OUT.svg`\n  = help: {USAGE}")) };
    let text = std::fs::read_to_string(&data).map_err(|e| format!("error: cannot read {data}: {e}"))?;
    let rows = rows(&text, &data)?;
    let (chart, width, height) = if kind == "bars" {
        let title = title.unwrap_or_else(|| "ratio against the peer (same run)".into());
        let bars = bars(&rows, &data, title, y_label.unwrap_or_else(|| "ratio".into()), reference)?;
        let width = (bars.groups.len() as u32 * 140).clamp(640, 3000);
        (Chart::Bars(bars), width, 460)
    } else {
        let mut series: Vec<Series> = Vec::new();
        for (n, [s, x, y]) in &rows {
            let (x, y) = (num(x, &data, *n)?, num(y, &data, *n)?);
            match series.iter_mut().find(|e| e.name == *s) {
                Some(e) => e.points.push((x, y)),
                None => series.push(Series::new(s.clone(), vec![(x, y)])),
            }
        }
        let scatter = Scatter {
            title: title.unwrap_or_else(|| "predicted vs measured".into()),
            x_label: x_label.unwrap_or_else(|| "measured".into()),
            y_label: y_label.unwrap_or_else(|| "predicted".into()),
            series,
            log,
        };
        (Chart::Scatter(scatter), 620, 560)
    };
    let svg = cake_plot::svg(&[chart], width, height).map_err(|e| e.to_string())?;
    std::fs::write(&out, svg).map_err(|e| format!("error: cannot write {out}: {e}"))?;
    Ok(format!("wrote {out}"))
}

/// The data lines: (1-based line number, three tab-separated fields).
fn rows(text: &str, name: &str) -> Result<Vec<(usize, [String; 3])>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let [a, b, c] = f.as_slice() else { return Err(format!("error: {name}:{}: {} field(s), expected three, tab-separated", n + 1, f.len())) };
        out.push((n + 1, [a.to_string(), b.to_string(), c.to_string()]));
    }
    Ok(out)
}

fn num(v: &str, name: &str, line: usize) -> Result<f64, String> {
    v.trim().parse().map_err(|e| format!("error: {name}:{line}: value `{v}`: {e}"))
}

fn bars(rows: &[(usize, [String; 3])], name: &str, title: String, y_label: String, reference: Option<f64>) -> Result<Bars, String> {
    let mut groups: Vec<String> = Vec::new();
    let mut series: Vec<(String, Vec<(usize, f64)>)> = Vec::new();
    for (n, [g, s, v]) in rows {
        let v = num(v, name, *n)?;
        let gi = groups.iter().position(|x| x == g).unwrap_or_else(|| {
            groups.push(g.clone());
            groups.len() - 1
        });
        match series.iter_mut().find(|(x, _)| x == s) {
            Some((_, vals)) => vals.push((gi, v)),
            None => series.push((s.clone(), vec![(gi, v)])),
        }
    }
    let series = series
        .into_iter()
        .map(|(name, vals)| {
            let mut values = vec![0.0; groups.len()];
            for (i, v) in vals {
                values[i] = v;
            }
            BarSeries { name, values }
        })
        .collect();
    Ok(Bars { title, y_label, groups, series, reference })
}
