//! The `accuracy` gate on calibration changes, with the real cost model and this checkout's
//! `calibration/sm_90a.toml`. The "measured" times are synthetic and labelled so: the model's own
//! predictions under a calibration whose bf16 tensor rate is 0.85× the file's (tensor-core-bound
//! shapes of the example GEMM), so the proposal that says 0.85× is the more accurate one.

use std::path::Path;

use cake::cost::accuracy::{Measurement, SavedRun, RUN_SCHEMA};
use cake::cost::Calibration;
use cake_merge_gates::{accuracy_gate, Change, ChangedPath, GateStatus, Tree};

const CAL: &str = "calibration/sm_90a.toml";
const RUN: &str = "calibration/runs/sm_90a-test.json";

fn checkout() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The calibration text with `[param.tensor_bf16_flops_per_s]`'s value scaled by `f`.
fn rate_scaled(f: f64) -> String {
    let text = std::fs::read_to_string(checkout().join(CAL)).unwrap();
    let mut doc: toml::Table = text.parse().unwrap();
    let p = doc["param"].as_table_mut().unwrap()["tensor_bf16_flops_per_s"].as_table_mut().unwrap();
    let v = p["value"].as_float().or(p["value"].as_integer().map(|i| i as f64)).unwrap();
    p.insert("value".into(), toml::Value::Float(v * f));
    doc.to_string()
}

fn runs_under(truth: &str) -> SavedRun {
    let cal = Calibration::from_toml_str(CAL, truth).unwrap();
    let source = std::fs::read_to_string(checkout().join("examples/gemm_bf16_ws.cake")).unwrap();
    let v = cake::check::check_source(&source).validated.unwrap();
    let mut run = SavedRun { schema: RUN_SCHEMA.into(), target: "sm_90a".into(), gpu: "synthetic (test)".into(), ..SavedRun::default() };
    for (m, n, k) in [(8192, 8192, 8192), (4096, 4096, 8192), (8192, 4096, 4096), (2048, 8192, 8192), (4096, 4096, 16384)] {
        let dims = [("M", m), ("N", n), ("K", k)].iter().map(|(a, b)| (a.to_string(), *b)).collect();
        let t = cake::cost::estimate(&v, &cal, &dims).unwrap().predicted_ms;
        run.accuracy.push(Measurement { name: format!("gemm {m}x{n}x{k}"), program: source.clone(), dims, measured_ms: t });
    }
    run
}

/// Base and proposal trees under `dir` with these calibration texts (and the proposal's run).
fn trees(dir: &Path, base: &str, proposal: &str, run: Option<&SavedRun>) -> (Tree, Tree, Vec<ChangedPath>) {
    let mut changed = vec![ChangedPath { path: CAL.into(), change: Change::Modified }];
    for (name, text) in [("base", base), ("proposal", proposal)] {
        std::fs::create_dir_all(dir.join(name).join("calibration/runs")).unwrap();
        std::fs::write(dir.join(name).join(CAL), text).unwrap();
    }
    if let Some(r) = run {
        std::fs::write(dir.join("proposal").join(RUN), serde_json::to_vec(r).unwrap()).unwrap();
        changed.push(ChangedPath { path: RUN.into(), change: Change::Added });
    }
    (Tree::new(dir.join("proposal")), Tree::new(dir.join("base")), changed)
}

#[test]
fn a_more_accurate_recalibration_passes_and_a_worse_one_fails_with_numbers() {
    let run = runs_under(&rate_scaled(0.85));
    let tmp = tempfile::tempdir().unwrap();
    let (p, b, changed) = trees(&tmp.path().join("good"), &rate_scaled(1.0), &rate_scaled(0.85), Some(&run));
    let g = accuracy_gate::gate(&p, &b, &changed);
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(g.summary.contains("MAPE") && g.summary.contains("over 5 runs"), "{}", g.summary);
    // The other way round: the proposal moves away from what was measured.
    let (p, b, changed) = trees(&tmp.path().join("bad"), &rate_scaled(0.85), &rate_scaled(1.0), Some(&run));
    let g = accuracy_gate::gate(&p, &b, &changed);
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(g.details[0].contains("less accurate than the base"), "{:?}", g.details);
    // Far off: below the floor, whatever the base.
    let (p, b, changed) = trees(&tmp.path().join("floor"), &rate_scaled(0.5), &rate_scaled(0.5), Some(&run));
    let g = accuracy_gate::gate(&p, &b, &changed);
    assert_eq!(g.status, GateStatus::Fail, "{g:?}");
    assert!(g.details[0].contains("below the floor"), "{:?}", g.details);
}

#[test]
fn a_recalibration_without_measured_runs_fails_and_other_changes_are_not_judged() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, b, changed) = trees(tmp.path(), &rate_scaled(1.0), &rate_scaled(0.85), None);
    let g = accuracy_gate::gate(&p, &b, &changed);
    assert_eq!(g.status, GateStatus::Fail);
    assert!(g.details[0].contains("commits no measured runs"), "{:?}", g.details);
    let rule = vec![ChangedPath { path: "compiler/rules/kernel/V600-x.toml".into(), change: Change::Added }];
    assert_eq!(accuracy_gate::gate(&p, &b, &rule).status, GateStatus::Na);
}
