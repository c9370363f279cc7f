//! `cake-plot bars DATA.tsv -o OUT.svg [--title T] [--y-label L] [--reference R]`: a grouped bar
//! chart from a small tab-separated file (`group<TAB>series<TAB>value` per line, `#` comments),
//! for the ratio charts of `benchmarks/RESULTS.md`. Groups and series keep their first order; a
//! group a series has no line for gets 0. Exit: 0 drawn, 2 usage, input or output error.

use std::process::ExitCode;

use cake_plot::{BarSeries, Bars, Chart};

const USAGE: &str = "usage: cake-plot bars DATA.tsv -o OUT.svg [--title T] [--y-label L] [--reference R]";

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
    if it.next().as_deref() != Some("bars") {
        return Err(format!("error: the only chart from a file is `bars`\n  = help: {USAGE}"));
    }
    let (mut data, mut out, mut title, mut y_label, mut reference) = (None, None, "ratio against the peer (same run)".to_string(), "ratio".to_string(), None);
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("error: `{flag}` needs a value\n  = help: {USAGE}"));
        match a.as_str() {
            "-o" | "--out" => out = Some(value("-o")?),
            "--title" => title = value("--title")?,
            "--y-label" => y_label = value("--y-label")?,
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
    let bars = parse(&text, &data, title, y_label, reference)?;
    let width = (bars.groups.len() as u32 * 140).clamp(640, 3000);
    let svg = cake_plot::svg(&[Chart::Bars(bars)], width, 460).map_err(|e| e.to_string())?;
    std::fs::write(&out, svg).map_err(|e| format!("error: cannot write {out}: {e}"))?;
    Ok(format!("wrote {out}"))
}

fn parse(text: &str, name: &str, title: String, y_label: String, reference: Option<f64>) -> Result<Bars, String> {
    let mut groups: Vec<String> = Vec::new();
    let mut series: Vec<(String, Vec<(usize, f64)>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let [g, s, v] = f.as_slice() else { return Err(format!("error: {name}:{}: {} field(s), expected `group<TAB>series<TAB>value`", n + 1, f.len())) };
        let v: f64 = v.trim().parse().map_err(|e| format!("error: {name}:{}: value `{v}`: {e}", n + 1))?;
        let gi = groups.iter().position(|x| x == g).unwrap_or_else(|| {
            groups.push(g.to_string());
            groups.len() - 1
        });
        match series.iter_mut().find(|(x, _)| x == s) {
            Some((_, vals)) => vals.push((gi, v)),
            None => series.push((s.to_string(), vec![(gi, v)])),
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
