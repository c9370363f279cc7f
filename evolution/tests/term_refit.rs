//! A misprediction bucket's implicated term (`cake_evolve::term_refit`), against the real cost model
//! and this checkout's `calibration/sm_90a.toml`.
//!
//! GPU times cannot be made here, so the "measured" times are **synthetic and labelled so**: the
//! cost model's own predictions under a calibration with one parameter moved by a known factor
//! (the hardware "is" other than the file says). The bucket is what `mine` would make of them:
//! the runs that are off. The term finder must name the moved parameter — not another one of its
//! bottleneck class — and its refit must recover the factor and improve runs it never saw.

#[path = "propose_fixture.rs"]
mod fixture;

use std::collections::BTreeMap;

use cake::cost::Calibration;
use cake_evolve::calibrate::{split_held_out, Measurement};
use cake_evolve::term_refit::{implicate, refit_term, BenchGuard, BenchRuns};

const CAL: &str = "calibration/sm_90a.toml";

/// No microbenchmark runs to guard.
fn no_guard() -> BenchGuard<'static> {
    BenchGuard::new("sm_90a", builtin(), &[])
}

fn builtin() -> &'static Calibration {
    cake::cost::builtin_calibration("sm_90a").expect("sm_90a is calibrated")
}

fn text() -> String {
    std::fs::read_to_string(fixture::checkout().join(CAL)).unwrap()
}

/// The sm_90a corpus programs the model predicts, at their gpu-tier and headline shapes.
fn corpus_runs(families: &[&str]) -> Vec<(String, String, BTreeMap<String, i64>)> {
    let corpus = cake::corpus::Corpus::load(fixture::checkout().join("corpus")).unwrap();
    let mut out = Vec::new();
    for case in corpus.cases.iter().filter(|c| c.manifest.target == "sm_90a" && c.manifest.expect.verdict == cake::corpus::Verdict::Accept && families.contains(&c.family.as_str())) {
        let Some(w) = &case.manifest.workload else { continue };
        let table = |v: &toml::Value| -> Option<BTreeMap<String, i64>> { Some(v.as_table()?.iter().filter_map(|(k, v)| v.as_integer().map(|i| (k.clone(), i))).collect()) };
        let mut shapes: Vec<BTreeMap<String, i64>> = w.get("headline").and_then(table).into_iter().collect();
        shapes.extend(w.get("shapes").and_then(|s| s.as_array()).and_then(|a| a.last()).and_then(table));
        for s in shapes {
            out.push((case.id.clone(), case.source.clone(), s));
        }
    }
    out
}

/// Runs "measured" under `truth`, named as the evidence store names them (`ID HASH @ SHAPE`).
fn measured(runs: &[(String, String, BTreeMap<String, i64>)], truth: &Calibration, current: &Calibration) -> (Vec<Measurement>, Vec<f64>) {
    let mut ms = Vec::new();
    let mut ratio = Vec::new();
    for (id, src, dims) in runs {
        let Some(v) = cake::check::check_source(src).validated else { continue };
        let (Ok(t), Ok(c)) = (cake::cost::estimate(&v, truth, dims), cake::cost::estimate(&v, current, dims)) else { continue };
        let shape: Vec<String> = dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
        ms.push(Measurement { name: format!("{id} {:012x} @ {}", ms.len(), shape.join(",")), program: src.clone(), dims: dims.clone(), measured_ms: t.predicted_ms });
        ratio.push(t.predicted_ms / c.predicted_ms);
    }
    (ms, ratio)
}

/// Runs of `families` "measured" with the SM's own intake at half the file's value (it binds in
/// grids of few SMs, kmeans-update's 16 tiles, and in each TMA stage's arrival, and barely
/// elsewhere), split as `propose` splits them: the held-out third of the programs, and of the fit
/// runs the bucket (those the model now predicts more than 10% too fast, as `mine` bins them) and
/// the rest.
struct IngestBucket {
    text: String,
    current: Calibration,
    fit: Vec<Measurement>,
    held_out: Vec<Measurement>,
    members: Vec<Measurement>,
    rest: Vec<Measurement>,
}

fn ingest_bucket(families: &[&str]) -> IngestBucket {
    let text = text();
    let current = Calibration::from_toml_str(CAL, &text).unwrap();
    let truth = Calibration::from_toml_str(CAL, &fixture::scaled(&text, "sm_ingest_bytes_per_s", 0.5)).unwrap();
    let (ms, ratio) = measured(&corpus_runs(families), &truth, &current);
    assert!(ms.len() >= 20, "{} runs", ms.len());
    let (fit, held_out) = split_held_out(&ms);
    let off = |m: &Measurement| ratio[ms.iter().position(|x| x.name == m.name).unwrap()] > 1.1;
    let (members, rest): (Vec<Measurement>, Vec<Measurement>) = fit.iter().cloned().partition(off);
    assert!(members.len() >= 3, "{} bucket runs", members.len());
    IngestBucket { text, current, fit, held_out, members, rest }
}

#[test]
fn a_bucket_implicates_the_one_parameter_that_is_off_and_its_refit_recovers_it() {
    let IngestBucket { text, current, fit, held_out, members, rest } = ingest_bucket(&["kmeans-update", "gemm-sm90-ws", "rmsnorm", "softmax", "gemm-batched"]);
    let truth = Calibration::from_toml_str(CAL, &fixture::scaled(&text, "sm_ingest_bytes_per_s", 0.5)).unwrap();
    let imp = implicate("sm_90a", &text, &members, &rest, &no_guard(), &|_| None).unwrap();
    assert_eq!(imp.param, "sm_ingest_bytes_per_s", "{imp:#?}");
    assert!(imp.bucket_error.1 < imp.bucket_error.0 * 0.75, "{imp:#?}");
    assert!(imp.rest_error.1 <= imp.rest_error.0 + 0.01, "{imp:#?}");
    // Tensor-core parameters are on the GEMMs' path too: they are candidates, not the answer.
    assert!(imp.candidates.len() > 1, "{imp:#?}");

    // Refit from the bucket's runs: the factor comes back, and the held-out runs improve.
    let (draft, new_text) = refit_term("sm_90a", &text, &imp, &fit, &held_out, "synthetic test runs").unwrap();
    let new = Calibration::from_toml_str(CAL, &new_text).unwrap();
    let f = new.params["sm_ingest_bytes_per_s"].value / current.params["sm_ingest_bytes_per_s"].value;
    assert!((f - 0.5).abs() < 0.05, "factor {f}");
    assert_eq!(draft.class, "term sm_ingest_bytes_per_s");
    assert!(draft.after.mape < draft.before.mape, "{draft:?}");
    assert_eq!(draft.after.n, held_out.iter().filter(|m| cake::check::check_source(&m.program).validated.is_some()).count());
    assert_eq!(new.meta.fitted_on, "synthetic test runs");
    // Every other parameter is as it was.
    for (name, p) in &current.params {
        if name != "sm_ingest_bytes_per_s" {
            assert_eq!(new.params[name].value, p.value, "{name}");
        }
    }

    // With the term's bench measured (runs made under the truth), the bench fits the value.
    let bench = calibration_bench(&truth);
    let imp = implicate("sm_90a", &text, &members, &rest, &no_guard(), &|p| (p == "sm_ingest_bytes_per_s").then(|| bench.clone())).unwrap();
    assert_eq!(imp.param, "sm_ingest_bytes_per_s");
    assert!(imp.bench.is_some());
    let (draft, new_text) = refit_term("sm_90a", &text, &imp, &fit, &held_out, "synthetic bench runs").unwrap();
    let new = Calibration::from_toml_str(CAL, &new_text).unwrap();
    let f = new.params["sm_ingest_bytes_per_s"].value / current.params["sm_ingest_bytes_per_s"].value;
    assert!((f - 0.5).abs() < 0.03, "factor from the bench {f}");
    assert_eq!(draft.fits[0].bench, "sm-ingest");
    assert_eq!(draft.fits[0].runs, 2);
}

/// The `sm-ingest` probe's 16 KiB-box program at its two shapes, "timed" under `truth`.
fn calibration_bench(truth: &Calibration) -> BenchRuns {
    let dir = fixture::checkout().join("calibration/microbench/sm_90a");
    let src = std::fs::read_to_string(dir.join("sm_ingest.cake")).unwrap();
    let v = cake::check::check_source(&src).validated.unwrap();
    let runs = [1024, 2048]
        .iter()
        .map(|r| {
            let dims: BTreeMap<String, i64> = [("R".to_string(), *r), ("C".to_string(), 65536)].into();
            Measurement { name: format!("sm_ingest @ R={r}"), program: src.clone(), dims: dims.clone(), measured_ms: cake::cost::estimate(&v, truth, &dims).unwrap().predicted_ms }
        })
        .collect();
    BenchRuns { bench: "sm-ingest".into(), gpu: "synthetic".into(), runs }
}

#[test]
fn a_bench_that_says_the_value_is_right_clears_the_term() {
    let IngestBucket { text, current, members, rest, .. } = ingest_bucket(&["kmeans-update", "gemm-sm90-ws", "rmsnorm"]);
    // The term's bench says its value is right (runs made under the current file): a measured
    // term is set to what its bench fits, not searched, so it cannot be the explanation.
    let unmoved = calibration_bench(&current);
    match implicate("sm_90a", &text, &members, &rest, &no_guard(), &|p| (p == "sm_ingest_bytes_per_s").then(|| unmoved.clone())) {
        Ok(imp) => assert_ne!(imp.param, "sm_ingest_bytes_per_s", "{imp:#?}"),
        Err(e) => assert!(e.contains("no single parameter explains the bucket"), "{e}"),
    }
}

#[test]
fn a_term_that_throws_a_microbenchmark_off_is_not_implicated() {
    use cake_evolve::microbench::BenchMeasurement;
    let IngestBucket { text, current, members, rest, .. } = ingest_bucket(&["kmeans-update", "gemm-sm90-ws", "rmsnorm"]);
    // Without a guard the bucket implicates the SM's intake (the first test); bench
    // `small-shape`'s runs, "measured" as the file predicts them, say the intake is right.
    let dir = fixture::checkout().join("calibration/microbench/sm_90a");
    let src = std::fs::read_to_string(dir.join("fill_gemm.cake")).unwrap();
    let v = cake::check::check_source(&src).validated.unwrap();
    let guard: Vec<BenchMeasurement> = [(128, 128, 64), (128, 128, 1024), (256, 512, 256)]
        .iter()
        .map(|&(m, n, k)| {
            let dims: BTreeMap<String, i64> = [("M".to_string(), m), ("N".to_string(), n), ("K".to_string(), k)].into();
            let t = cake::cost::estimate(&v, &current, &dims).unwrap().predicted_ms;
            BenchMeasurement { bench: "small-shape".into(), m: Measurement { name: format!("fill_gemm @ {m}x{n}x{k}"), program: src.clone(), dims, measured_ms: t } }
        })
        .collect();
    match implicate("sm_90a", &text, &members, &rest, &BenchGuard::new("sm_90a", &current, &guard), &|_| None) {
        Ok(imp) => assert_ne!(imp.param, "sm_ingest_bytes_per_s", "{imp:#?}"),
        Err(e) => assert!(e.contains("throws microbenchmark `small-shape` off"), "{e}"),
    }
}

#[test]
fn runs_the_model_now_predicts_implicate_nothing() {
    let text = text();
    let current = Calibration::from_toml_str(CAL, &text).unwrap();
    let runs = corpus_runs(&["kmeans-update", "rmsnorm"]);
    let (ms, _) = measured(&runs, &current, &current);
    let (members, rest) = ms.split_at(ms.len() / 2);
    let e = implicate("sm_90a", &text, members, rest, &no_guard(), &|_| None).unwrap_err();
    assert!(e.contains("not systematically off"), "{e}");
}

#[test]
fn a_bucket_no_parameter_explains_is_refused_with_its_candidates() {
    let text = text();
    let current = Calibration::from_toml_str(CAL, &text).unwrap();
    // Every other program 1.5x slower at both its shapes, the rest exact: one program's runs slow
    // and its neighbour's not, with nothing in the model that tells them apart.
    let runs = corpus_runs(&["rmsnorm"]);
    let (mut ms, _) = measured(&runs, &current, &current);
    assert!(ms.len() >= 6, "{} runs", ms.len());
    let mut members = Vec::new();
    let mut rest = Vec::new();
    for (i, m) in ms.iter_mut().enumerate() {
        if i % 4 < 2 {
            m.measured_ms *= 1.5;
            members.push(m.clone());
        } else {
            rest.push(m.clone());
        }
    }
    match implicate("sm_90a", &text, &members, &rest, &no_guard(), &|_| None) {
        Err(e) => assert!(e.contains("no single parameter explains the bucket") || e.contains("no fitted parameter moves"), "{e}"),
        Ok(imp) => panic!("a bucket of runs the model cannot tell from the rest implicated {imp:#?}"),
    }
}

#[test]
fn the_terms_bench_runs_come_from_a_saved_run_and_are_named_when_missing() {
    use cake_evolve::microbench::{BenchMeasurement, SavedRun, RUN_SCHEMA};
    use cake_evolve::term_refit::{bench_runs, TermBenches};
    let root = fixture::checkout();
    let text = text();
    let current = Calibration::from_toml_str(CAL, &text).unwrap();
    let bench = calibration_bench(&current);
    let mut run = SavedRun { schema: RUN_SCHEMA.into(), target: "sm_90a".into(), gpu: "synthetic".into(), ..SavedRun::default() };
    // Runs filed under bench `mma-sync` (which fits mma_sync_flops_per_s) and `launch`; their
    // programs do not matter to the lookup.
    run.suite = bench.runs.iter().map(|m| BenchMeasurement { bench: "mma-sync".into(), m: m.clone() }).collect();
    run.suite.push(BenchMeasurement { bench: "launch".into(), m: bench.runs[0].clone() });
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("run.json");
    std::fs::write(&file, serde_json::to_vec(&run).unwrap()).unwrap();
    let got = bench_runs(&TermBenches::Saved(file.clone()), &root, "sm_90a", "mma_sync_flops_per_s").unwrap();
    assert_eq!((got.bench.as_str(), got.runs.len(), got.gpu.as_str()), ("mma-sync", 2, "synthetic"));
    // A term no bench fits, a saved run without the bench, and no GPU run asked for: each says so.
    let e = bench_runs(&TermBenches::Saved(file.clone()), &root, "sm_90a", "tensor_sustained_fraction").unwrap_err();
    assert!(e.contains("no bench of calibration/microbench/sm_90a/suite.toml fits `tensor_sustained_fraction`"), "{e}");
    let e = bench_runs(&TermBenches::Saved(file), &root, "sm_90a", "dram_bytes_per_s").unwrap_err();
    assert!(e.contains("has no timed run of bench tma-load"), "{e}");
    let e = bench_runs(&TermBenches::Records, &root, "sm_90a", "mma_sync_flops_per_s").unwrap_err();
    assert!(e.contains("--term-benches"), "{e}");
    // A corrupt saved run is an error, not a panic.
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let e = bench_runs(&TermBenches::Saved(bad), &root, "sm_90a", "mma_sync_flops_per_s").unwrap_err();
    assert!(e.contains("not a saved calibration run"), "{e}");
}
