//! `cake-plot bars|scatter DATA.tsv -o OUT.svg`: the committed ratio chart of
//! `benchmarks/RESULTS.md` is what its data file draws, a scatter from a file has its points, and
//! bad input exits 2 naming the line.

use std::path::Path;
use std::process::Command;

fn plot(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cake-plot")).args(args).output().expect("run cake-plot")
}

#[test]
fn the_committed_ratio_chart_is_what_its_data_draws() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::temp_dir().join(format!("cake-plot-ratios-{}.svg", std::process::id()));
    let data = root.join("benchmarks/ratios.tsv");
    let o = plot(&["bars", data.to_str().unwrap(), "--reference", "1", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let drawn = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let committed = std::fs::read_to_string(root.join("benchmarks/ratios.svg")).unwrap();
    assert!(
        drawn == committed,
        "benchmarks/ratios.svg is stale: run `cargo run -p cake-plot -- bars benchmarks/ratios.tsv --reference 1 -o benchmarks/ratios.svg`"
    );
    assert!(drawn.contains("\nevolved kmeans / flashlib\n"));
}

#[test]
fn a_scatter_from_a_file_and_bad_lines_are_refused_with_their_line() {
    let dir = tempfile_dir();
    let data = dir.join("pm.tsv");
    std::fs::write(&data, "# series\tmeasured\tpredicted\ngemm\t1.0\t1.2\ngemm\t2.0\t1.9\nsoftmax\t0.1\t0.2\n").unwrap();
    let out = dir.join("pm.svg");
    let o = plot(&["scatter", data.to_str().unwrap(), "--log", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert_eq!(svg.matches("<circle").count(), 3 + 2, "three points and two legend markers");
    std::fs::write(&data, "gemm\t1.0\n").unwrap();
    let o = plot(&["scatter", data.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pm.tsv:1: 2 field(s)"), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(&data, "gemm\t0\t1\n").unwrap();
    let o = plot(&["scatter", data.to_str().unwrap(), "--log", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[D002]"), "a zero on a log axis: {}", String::from_utf8_lossy(&o.stderr));
    let o = plot(&["pie", data.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cake-plot-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// scripts/corpus-cost-accuracy.py --svg draws its scatter through this binary: both shapes of the
/// fixture (compiler/tests/fixtures/cost-accuracy/), one series per family, every passing run a point.
#[test]
fn the_cost_accuracy_report_draws_its_scatter_with_cake_plot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let svg = std::env::temp_dir().join(format!("cake-cost-accuracy-{}.svg", std::process::id()));
    let fixture = root.join("compiler/tests/fixtures/cost-accuracy");
    let o = Command::new("python3")
        .arg(root.join("scripts/corpus-cost-accuracy.py"))
        .arg(fixture.join("measured.json"))
        .arg("--predictions")
        .arg(fixture.join("predictions.json"))
        .arg("--svg")
        .arg(&svg)
        .env("CAKE_PLOT_BIN", env!("CARGO_BIN_EXE_cake-plot"))
        .env("CAKE_BIN", "/nonexistent/cake")
        .current_dir(&root)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let drawn = std::fs::read_to_string(&svg).unwrap();
    let tsv = std::fs::read_to_string(format!("{}.tsv", svg.display())).unwrap();
    let _ = (std::fs::remove_file(&svg), std::fs::remove_file(format!("{}.tsv", svg.display())));
    assert!(drawn.starts_with("<svg") && drawn.contains("n=16"), "{}", &drawn[..drawn.len().min(400)]);
    for family in ["alpha", "beta", "gamma"] {
        assert!(drawn.contains(family), "series `{family}` in the legend");
    }
    // 8 + 6 + 2 passing runs (gamma's headline failed its oracle), both shapes.
    assert_eq!(tsv.lines().filter(|l| !l.starts_with('#')).count(), 16, "{tsv}");
}
