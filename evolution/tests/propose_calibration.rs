//! Calibration proposals against the real cost model and `calibration/sm_90a.toml`.
//!
//! The measurements here are **synthetic and labelled so** (the H200 runs are in
//! benchmarks/RESULTS.md): the corpus programs' own predictions at their headline shapes, with the programs of one
//! bottleneck class made 1.6× slower — a systematic error of known size. The refit must find that
//! class, recover the factor, and improve the accuracy.

#[path = "propose_fixture.rs"]
mod fixture;

use std::collections::BTreeMap;

use cake::cost::Calibration;
use cake_evolve::calibrate::{propose_calibration, Measurement};

#[test]
fn a_systematic_error_of_one_class_is_refitted_and_accuracy_improves() {
    let root = fixture::checkout();
    let text = std::fs::read_to_string(root.join("calibration/sm_90a.toml")).unwrap();
    let cal = Calibration::from_toml_str("calibration/sm_90a.toml", &text).unwrap();
    let corpus = cake::corpus::Corpus::load(root.join("corpus")).unwrap();
    let mut predicted = Vec::new();
    for case in corpus.cases.iter().filter(|c| c.manifest.target == "sm_90a" && c.manifest.expect.verdict == cake::corpus::Verdict::Accept) {
        let Some(w) = &case.manifest.workload else { continue };
        let Some(head) = w.get("headline").and_then(|h| h.as_table()) else { continue };
        let dims: BTreeMap<String, i64> = head.iter().filter_map(|(k, v)| v.as_integer().map(|i| (k.clone(), i))).collect();
        let Some(v) = cake::check::check_source(&case.source).validated else { continue };
        if let Ok(e) = cake::cost::estimate(&v, &cal, &dims) {
            predicted.push((case.id.clone(), case.source.clone(), dims, e.predicted_ms, e.bottleneck));
        }
    }
    assert!(predicted.len() >= 6, "the cost model predicts corpus programs ({} here)", predicted.len());
    // The most common bottleneck class among them is the one made slower.
    let mut counts: BTreeMap<_, usize> = BTreeMap::new();
    for p in &predicted {
        *counts.entry(p.4).or_default() += 1;
    }
    let (&class, &n) = counts.iter().max_by_key(|(_, n)| **n).unwrap();
    assert!(n >= 3, "{counts:?}");
    let ms: Vec<Measurement> = predicted
        .iter()
        .map(|(id, src, dims, p, b)| Measurement { name: id.clone(), program: src.clone(), dims: dims.clone(), measured_ms: if *b == class { p * 1.6 } else { *p } })
        .collect();
    let (draft, new_text) = propose_calibration("sm_90a", &text, &ms, "synthetic test measurements", None).unwrap();
    assert_eq!(draft.class, class.as_str());
    let (ratio, factor) = (draft.class_ratio.unwrap(), draft.factor.unwrap());
    assert!((ratio - 1.6).abs() < 0.05, "median measured/predicted {ratio}");
    assert!(factor > 1.2 && factor < 2.0, "factor {factor}");
    assert!(draft.after.mape < draft.before.mape, "MAPE {} → {}", draft.before.mape, draft.after.mape);
    assert!(draft.after.spearman >= draft.before.spearman - 1e-9);
    assert!(!draft.params.is_empty());
    // The new file loads and says how it was fitted.
    let new = Calibration::from_toml_str("calibration/sm_90a.toml", &new_text).unwrap();
    assert_eq!(new.meta.fitted_on, "synthetic test measurements");
    assert!(new.meta.accuracy.n.is_some());
    // No systematic error, nothing to propose.
    let exact: Vec<Measurement> = predicted.iter().map(|(id, src, dims, p, _)| Measurement { name: id.clone(), program: src.clone(), dims: dims.clone(), measured_ms: *p }).collect();
    assert!(propose_calibration("sm_90a", &text, &exact, "x", None).unwrap_err().contains("no bottleneck class"));
    // A bucket's class is the one refitted: the slowed class when the bucket names it, and
    // nothing for a bucket of another class, which the runs do not show mispredicted.
    let (named, _) = propose_calibration("sm_90a", &text, &ms, "x", Some(class)).unwrap();
    assert_eq!(named.class, class.as_str());
    let other = counts.keys().copied().find(|&b| b != class).expect("a second class among the corpus predictions");
    let err = propose_calibration("sm_90a", &text, &ms, "x", Some(other)).unwrap_err();
    assert!(err.contains(&format!("the bucket's class, {other}, is not systematically mispredicted")), "{err}");
}
