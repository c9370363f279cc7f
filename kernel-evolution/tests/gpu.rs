//! On the H200 (skipped by name elsewhere: `scripts/test.sh` leaves out `needs_gpu_*` without a
//! GPU): the loop times Flash-KMeans candidates against the oracle and cuBLAS.

mod support;

use support::*;

#[test]
fn needs_gpu_kmeans_loop_checks_and_times_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    let c = contract("kmeans-assign.toml");
    let out = run(&["run", c.to_str().unwrap(), "--db", "k.sqlite", "--seed", "1", "--budget-evals", "4", "--evidence", "ev", "--format", "json"], &cake_bin(), tmp.path());
    let summary = json(&out);
    assert_eq!(out.status.code(), Some(0), "{summary}\n{}", stderr(&out));
    assert!(summary["passed"].as_u64().unwrap() >= 1, "{summary}");
    let report = json(&run(&["report", "--db", "k.sqlite", "--format", "json"], &cake_bin(), tmp.path()));
    let top = &report["leaderboard"][0];
    assert!(top["measured_ms"].as_f64().unwrap() > 0.0, "{report}");
    assert!(top["peers"]["cublas"]["median_ms"].as_f64().is_some(), "cuBLAS timed in the same run: {report}");
}
