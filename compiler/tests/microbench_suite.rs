//! The sm_90a microbenchmark suite (`calibration/microbench/sm_90a/suite.toml`) cannot rot
//! silently: every bench's programs type-check and verify, its workload fits them at its shapes,
//! every fitted name is a cost-model parameter, and the cost model — with the built-in calibration
//! — names the bottleneck the bench is meant to measure and moves with each fitted parameter
//! (halving or doubling it changes every program's predicted time by a factor of at least 1.3,
//! either way). With the CUDA toolchain (`needs_toolchain_`: left out where it is absent), every
//! program also compiles without spills. The `[[unfitted]]` probes (terms the model lacks) are held
//! to the same program, workload and compile checks; what they `need` must not be a parameter yet.
//!
//! `cake-evolve-compiler calibrate --target sm_90a` (evolution/src/microbench.rs) reads the same
//! file; the schema is in the file's header.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cake::cost::{self, Bottleneck, Calibration};
use cake::diag::Severity;
use cake::lower::LowerOptions;
use cake::runtime::workload::{self, WorkloadSpec};
use cake::target::TargetTable;
use cake::verify::Validated;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct SuiteFile {
    target: String,
    bench: Vec<Bench>,
    /// The accuracy set (corpus families judged after the fit): read by the calibrate engine,
    /// not checked here.
    #[serde(default)]
    #[allow(dead_code)]
    accuracy: Vec<toml::Value>,
    /// Probes of terms the model lacks: checked here like benches, but nothing is fitted.
    #[serde(default)]
    unfitted: Vec<Unfitted>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Unfitted {
    name: String,
    measures: String,
    programs: Vec<String>,
    #[serde(default)]
    workload: Option<String>,
    shapes: Vec<BTreeMap<String, i64>>,
    needs: Vec<String>,
    #[serde(default)]
    informs: Vec<String>,
    #[serde(default)]
    repeats: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Bench {
    name: String,
    measures: String,
    programs: Vec<String>,
    #[serde(default)]
    workload: Option<String>,
    shapes: Vec<BTreeMap<String, i64>>,
    fits: Vec<String>,
    #[serde(default)]
    repeats: Option<u32>,
}

/// The bottleneck each bench is built to expose (the ones it may be named by). A new bench needs
/// an entry here: say what it measures.
fn expected_bottleneck(bench: &str) -> &'static [Bottleneck] {
    match bench {
        "launch" | "mbarrier" | "wgmma-wait" | "store-wait" | "transpose" | "small-shape" | "tma-stage" => &[Bottleneck::LatencySync],
        // A warp's path of element-loop round trips: their latency, and their queue behind every
        // resident warp's bytes, which the model reports as memory time on the path.
        "row-flat" | "row-steps" => &[Bottleneck::LatencySync, Bottleneck::Memory],
        // Serial scalar steps that re-read the row from L1.
        "row-reread-l1" => &[Bottleneck::LatencySync],
        "wgmma" | "mma-sync" => &[Bottleneck::TensorCore],
        "tma-load" | "epilogue" => &[Bottleneck::Memory],
        "argmin" | "argmin-1wg" => &[Bottleneck::Epilogue],
        other => panic!("bench `{other}`: add its expected bottleneck to expected_bottleneck() in {}", file!()),
    }
}

/// Halving or doubling a fitted parameter must change each prediction by at least this factor.
const MIN_FACTOR: f64 = 1.3;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn suite_dir() -> PathBuf {
    root().join("calibration/microbench/sm_90a")
}

fn load_suite() -> SuiteFile {
    let path = suite_dir().join("suite.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// One program of `bench`, type-checked and verified with no warnings: (source, validated).
fn checked_program(suite: &SuiteFile, bench: &str, p: &str) -> (String, Validated) {
    let src = read(&suite_dir().join(p));
    let checked = cake::check::check_source(&src);
    let bad: Vec<String> = checked
        .diagnostics
        .iter()
        .filter(|d| matches!(d.severity, Severity::Error | Severity::Warning))
        .map(|d| format!("{} {}", d.code, d.message))
        .collect();
    assert!(bad.is_empty(), "bench `{bench}`: {p} has errors or warnings: {bad:#?}");
    let v = checked.validated.unwrap_or_else(|| panic!("bench `{bench}`: {p} does not verify"));
    assert_eq!(v.module().target, suite.target, "bench `{bench}`: {p} is for another target");
    (src, v)
}

/// Every program of the suite's benches: (bench, file name, source, validated program).
fn programs(suite: &SuiteFile) -> Vec<(&Bench, &str, String, Validated)> {
    let mut out = Vec::new();
    for b in &suite.bench {
        for p in &b.programs {
            let (src, v) = checked_program(suite, &b.name, p);
            out.push((b, p.as_str(), src, v));
        }
    }
    out
}

/// Every program of the `[[unfitted]]` probes, likewise.
fn probe_programs(suite: &SuiteFile) -> Vec<(&Unfitted, &str, String, Validated)> {
    let mut out = Vec::new();
    for u in &suite.unfitted {
        for p in &u.programs {
            let (src, v) = checked_program(suite, &u.name, p);
            out.push((u, p.as_str(), src, v));
        }
    }
    out
}

fn workload_path(workload: &Option<String>, program: &str) -> PathBuf {
    suite_dir().join(match workload {
        Some(w) => w.clone(),
        None => format!("{}.workload.toml", program.trim_end_matches(".cake")),
    })
}

/// The built-in calibration text with one parameter scaled (fractions capped at 1).
fn scaled_calibration(base: &str, param: &str, factor: f64) -> Calibration {
    let mut doc: toml::Table = toml::from_str(base).expect("the calibration file parses");
    let p = doc
        .get_mut("param")
        .and_then(|t| t.get_mut(param))
        .and_then(|t| t.as_table_mut())
        .unwrap_or_else(|| panic!("the calibration has no [param.{param}]"));
    let fraction = p.get("unit").and_then(|u| u.as_str()) == Some("fraction");
    let v = p.get("value").and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64))).expect("a numeric value");
    let mut nv = v * factor;
    if fraction {
        nv = nv.min(1.0);
    }
    p.insert("value".into(), toml::Value::Float(nv));
    let text = toml::to_string(&doc).expect("serializes");
    Calibration::from_toml_str("calibration/sm_90a.toml (scaled)", &text).expect("the scaled calibration is valid")
}

#[test]
fn suite_file_is_well_formed() {
    let suite = load_suite();
    assert_eq!(suite.target, "sm_90a");
    assert!(!suite.bench.is_empty(), "the suite has no [[bench]]");
    let known = cost::calibration::names();
    let mut names = BTreeSet::new();
    let mut fitted = BTreeSet::new();
    for b in &suite.bench {
        assert!(names.insert(b.name.as_str()), "two benches are named `{}`", b.name);
        assert!(!b.measures.trim().is_empty() && !b.measures.contains('\n'), "bench `{}`: `measures` is one line", b.name);
        assert!(!b.programs.is_empty() && !b.shapes.is_empty() && !b.fits.is_empty(), "bench `{}` needs programs, shapes and fits", b.name);
        assert!(b.repeats.is_none_or(|r| r > 0), "bench `{}`: repeats must be positive", b.name);
        for f in &b.fits {
            assert!(known.contains(&f.as_str()), "bench `{}` fits `{f}`, which is not a cost-model parameter (calibration.rs SPECS)", b.name);
            assert!(fitted.insert(f.as_str()), "`{f}` is fitted by two benches");
        }
        let _ = expected_bottleneck(&b.name);
        for p in &b.programs {
            assert!(suite_dir().join(p).is_file(), "bench `{}`: {p} does not exist", b.name);
        }
    }
    for u in &suite.unfitted {
        assert!(names.insert(u.name.as_str()), "two benches are named `{}`", u.name);
        assert!(!u.measures.trim().is_empty() && !u.measures.contains('\n'), "[[unfitted]] `{}`: `measures` is one line", u.name);
        assert!(!u.programs.is_empty() && !u.shapes.is_empty() && !u.needs.is_empty(), "[[unfitted]] `{}` needs programs, shapes and needs", u.name);
        assert!(u.repeats.is_none_or(|r| r > 0), "[[unfitted]] `{}`: repeats must be positive", u.name);
        for n in &u.needs {
            assert!(!known.contains(&n.as_str()), "[[unfitted]] `{}` needs `{n}`, a cost-model parameter now: make it a [[bench]] that fits it", u.name);
        }
        for n in &u.informs {
            assert!(known.contains(&n.as_str()), "[[unfitted]] `{}` informs `{n}`, which is not a cost-model parameter", u.name);
        }
        for p in &u.programs {
            assert!(suite_dir().join(p).is_file(), "[[unfitted]] `{}`: {p} does not exist", u.name);
        }
    }
}

/// The probes' programs verify, their workloads (timing only) fit them at every shape, and the
/// model predicts each of them there, so the device script's runs can be compared with it.
#[test]
fn unfitted_probes_verify_fit_their_workloads_and_are_predicted() {
    let suite = load_suite();
    assert!(!suite.unfitted.is_empty(), "issue 17's probes are registered as [[unfitted]]");
    let base = cost::builtin_calibration("sm_90a").expect("sm_90a is calibrated");
    for (u, p, _, v) in probe_programs(&suite) {
        let wpath = workload_path(&u.workload, p);
        let w = WorkloadSpec::load(&wpath).unwrap_or_else(|e| panic!("[[unfitted]] `{}`: {e}", u.name));
        assert_eq!(w.oracle.name(), "none", "[[unfitted]] `{}`: {} times only (oracle `none`)", u.name, wpath.display());
        w.validate(v.module()).unwrap_or_else(|e| panic!("[[unfitted]] `{}`: {} does not fit {p}: {e}", u.name, wpath.display()));
        for s in &u.shapes {
            workload::check_shape(v.module(), s).unwrap_or_else(|e| panic!("[[unfitted]] `{}`: {p} at {s:?}: {e}", u.name));
            let e = cost::estimate(&v, base, s).unwrap_or_else(|err| panic!("[[unfitted]] `{}`: {p} at {s:?}: {err}", u.name));
            eprintln!("{:<16} {:<24} {:<34} {:>9.4} ms  {}", u.name, p, workload::shape_label(s), e.predicted_ms, e.bottleneck.as_str());
        }
    }
}

#[test]
fn programs_verify_and_workloads_fit_them() {
    let suite = load_suite();
    for (b, p, _, v) in programs(&suite) {
        let wpath = workload_path(&b.workload, p);
        let w = WorkloadSpec::load(&wpath).unwrap_or_else(|e| panic!("bench `{}`: {e}", b.name));
        // Timing benches use oracle `none`; a bench over a real kernel keeps its oracle, so a
        // wrong answer is never timed.
        assert!(w.oracle.name() == "none" || b.name.starts_with("argmin"), "bench `{}`: {} times only (oracle `none`)", b.name, wpath.display());
        w.validate(v.module()).unwrap_or_else(|e| panic!("bench `{}`: {} does not fit {p}: {e}", b.name, wpath.display()));
        for s in &b.shapes {
            workload::check_shape(v.module(), s).unwrap_or_else(|e| panic!("bench `{}`: {p} at {s:?}: {e}", b.name));
        }
    }
}

/// Every program: the named bottleneck is the bench's; and for each fitted parameter, halving or
/// doubling it moves some program of its bench by a factor of at least `MIN_FACTOR` one way (a rate can
/// run into another ceiling when doubled: wgmma m64n64 meets the shared-memory read bandwidth). Prints the
/// table (`cargo test -p cake --test microbench_suite -- --nocapture`).
#[test]
fn the_model_names_the_bottleneck_and_moves_with_the_fitted_parameters() {
    let suite = load_suite();
    let base_text = read(&root().join("calibration/sm_90a.toml"));
    let base = cost::builtin_calibration("sm_90a").expect("sm_90a is calibrated");
    let mut failures = Vec::new();
    // Per (bench, parameter): the most any of the bench's programs moves.
    let mut most_by: std::collections::BTreeMap<(String, String), f64> = std::collections::BTreeMap::new();
    for (b, p, _, v) in programs(&suite) {
        let want = expected_bottleneck(&b.name);
        for s in &b.shapes {
            let e = cost::estimate(&v, base, s).unwrap_or_else(|err| panic!("bench `{}`: {p} at {s:?}: {err}", b.name));
            eprintln!(
                "{:<11} {:<26} {:<34} {:>9.4} ms  {:<12} ({:.0}%)",
                b.name,
                p,
                workload::shape_label(s),
                e.predicted_ms,
                e.bottleneck.as_str(),
                100.0 * e.bottleneck_share
            );
            if !want.contains(&e.bottleneck) {
                failures.push(format!("bench `{}`: {p} at {s:?} is {}-bound in the model, not {want:?}: {:?}", b.name, e.bottleneck, e.components));
            }
            for f in &b.fits {
                let mut line = format!("{:<11}   {f}:", "");
                let mut most: f64 = 1.0;
                for factor in [0.5, 2.0] {
                    let cal = scaled_calibration(&base_text, f, factor);
                    let t = cost::estimate(&v, &cal, s).expect("estimate").predicted_ms;
                    most = most.max((t / e.predicted_ms).max(e.predicted_ms / t));
                    line += &format!("  x{factor}: {t:.4} ms ({:+.0}%)", 100.0 * (t / e.predicted_ms - 1.0));
                }
                let e = most_by.entry((b.name.clone(), f.clone())).or_insert(1.0);
                *e = e.max(most);
                eprintln!("{line}");
            }
        }
    }
    for ((bench, f), most) in &most_by {
        if *most < MIN_FACTOR {
            failures.push(format!("bench `{bench}`: halving or doubling `{f}` moves no program's prediction by more than a factor of {most:.3}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn needs_toolchain_programs_compile_without_spills() {
    cake::nvrtc::ensure_nvrtc().unwrap_or_else(|e| panic!("no CUDA toolchain: {e}"));
    let suite = load_suite();
    let target = TargetTable::builtin().get(&suite.target).expect("known target");
    let all = programs(&suite).into_iter().map(|(b, p, src, v)| (b.name.as_str(), p, src, v));
    let probes = probe_programs(&suite).into_iter().map(|(u, p, src, v)| (u.name.as_str(), p, src, v));
    for (name, p, src, v) in all.chain(probes) {
        let built = cake::nvrtc::build_with(&v, target, &LowerOptions::with_source(p, &src))
            .unwrap_or_else(|e| panic!("bench `{name}`: {p} does not build: {e}"));
        let r = &built.report;
        eprintln!("{name:<16} {p}: {} registers, spills {}/{} B", r.registers.unwrap_or(0), r.spill_store_bytes, r.spill_load_bytes);
        assert_eq!(r.spills(), 0, "bench `{name}`: {p} spills\n{}", built.log);
        assert_eq!(r.stack_frame_bytes, 0, "bench `{name}`: {p} has a stack frame\n{}", built.log);
        assert!(
            built.diagnostics.iter().all(|d| d.code != "P003" && d.code != "P004"),
            "bench `{name}`: {p}: setmaxnreg ignored or wgmma serialized: {:#?}",
            built.diagnostics
        );
    }
}
