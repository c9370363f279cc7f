//! `benchmarks/interleave.py` (issue 18, item 6: a Cake kernel against an out-of-process peer in
//! interleaved rounds) on a machine without a GPU, with stand-ins for `cake bench` and the peer
//! script (`fixtures/interleave/`): the rounds alternate Cake, peer, Cake, ...; the ratio is the
//! median of the peer's round medians over Cake's; a kernel whose output fails its oracle, a peer
//! that prints no median, or too few rounds are errors; a side without a GPU (exit 3) is a skip.
//! Needs python3.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(name: &str) -> String {
    root().join("compiler/tests/fixtures/interleave").join(name).display().to_string()
}

struct Run {
    out: Output,
    log: String,
    json: Option<serde_json::Value>,
}

fn interleave(env: &[(&str, &str)], extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let log = dir.path().join("log");
    let json = dir.path().join("ratio.json");
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("benchmarks/interleave.py"))
        .args(["--cake", &format!("python3 {} bench k.cake --shape R=64 --dist normal", fixture("stand_in_cake.py"))])
        .args(["--peer", &format!("python3 {} softmax --rows 64", fixture("stand_in_peer.py"))])
        .args(["-o", &json.display().to_string()])
        .args(extra)
        .env("LOG", &log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python3 runs");
    Run {
        out,
        log: std::fs::read_to_string(&log).unwrap_or_default(),
        json: std::fs::read_to_string(&json).ok().map(|t| serde_json::from_str(&t).expect("the output is JSON")),
    }
}

#[test]
fn rounds_alternate_and_the_ratio_is_the_median_of_round_medians() {
    let r = interleave(&[("CAKE_MEDIANS", "1.0,1.2,0.9"), ("PEER_MEDIANS", "1.5,1.1,1.3")], &["--rounds", "3", "--repeats", "20"]);
    assert!(r.out.status.success(), "{}", String::from_utf8_lossy(&r.out.stderr));
    let order: Vec<&str> = r.log.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(order, ["cake", "peer", "cake", "peer", "cake", "peer"]);
    // Every call of either side gets the sample count; Cake also its own evidence folder.
    assert!(r.log.lines().all(|l| l.contains("--repeats 20")), "{}", r.log);
    assert!(r.log.lines().filter(|l| l.starts_with("cake")).all(|l| l.contains("--evidence")), "{}", r.log);
    let j = r.json.expect("-o writes the rounds");
    // median(1.5, 1.1, 1.3) / median(1.0, 1.2, 0.9) = 1.3 / 1.0.
    assert!((j["speed_ratio"].as_f64().unwrap() - 1.3).abs() < 1e-9, "{j}");
    assert_eq!(j["kernel_round_medians_ms"], serde_json::json!([1.0, 1.2, 0.9]));
    assert_eq!(j["peer_round_medians_ms"], serde_json::json!([1.5, 1.1, 1.3]));
    assert!(String::from_utf8_lossy(&r.out.stdout).contains("speed ratio 1.300"));
}

#[test]
fn an_output_that_fails_its_oracle_is_an_error_not_a_time() {
    let r = interleave(&[("CAKE_MEDIANS", "1.0,1.0,1.0"), ("PEER_MEDIANS", "1.0,1.0,1.0"), ("CAKE_VERDICT", "mismatch")], &[]);
    assert_eq!(r.out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.out.stderr).contains("did not pass its oracle"), "{}", String::from_utf8_lossy(&r.out.stderr));
    assert!(r.json.is_none(), "nothing is written for a failed run");
}

#[test]
fn a_side_without_a_gpu_is_a_skip() {
    let r = interleave(&[("CAKE_MEDIANS", "1.0"), ("PEER_MEDIANS", "1.0"), ("CAKE_EXIT", "3")], &[]);
    assert_eq!(r.out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&r.out.stdout).starts_with("SKIP: "));
    assert!(r.json.is_none());
}

#[test]
fn a_peer_without_a_median_and_too_few_rounds_are_errors() {
    let r = interleave(&[("CAKE_MEDIANS", "1.0,1.0,1.0"), ("PEER_MEDIANS", "none,none,none")], &[]);
    assert_eq!(r.out.status.code(), Some(1), "{}", String::from_utf8_lossy(&r.out.stderr));
    assert!(String::from_utf8_lossy(&r.out.stderr).contains("median_ms"), "{}", String::from_utf8_lossy(&r.out.stderr));
    let r = interleave(&[("CAKE_MEDIANS", "1.0,1.0"), ("PEER_MEDIANS", "1.0,1.0")], &["--rounds", "2"]);
    assert_eq!(r.out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.out.stderr).contains("at least 3 rounds"));
}
