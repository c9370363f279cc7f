//! `cake-evolve-kernel run --gpus` (issue 20, item 2) on a machine without GPUs: a stand-in
//! `nvidia-smi` on PATH lists the GPU ids the test chooses, and the stand-in `cake`
//! (tests/fixtures/stand-in-gpu-cake.py) logs the CUDA_VISIBLE_DEVICES of every call and, where the
//! test asks, dies (SIGKILL) on one GPU. Its mismatches follow the program's hash, so parallel calls
//! judge a candidate as a serial call does. Checked: a search over two GPUs evaluates the same
//! candidates as over one, under the same seed, with the same verdicts and times, and both GPUs
//! are used; a worker whose `cake` dies has its candidate evaluated again on the other GPU, and
//! the database still matches the one-GPU search; a bad `--gpus` is a coded error.

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cake_evolve_kernel::db::Db;
use support::*;

fn stand_in() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stand-in-gpu-cake.py")
}

/// A scratch host: `bin/nvidia-smi` lists GPUs `0` and `1`.
fn host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("bin")).unwrap();
    let smi = dir.path().join("bin/nvidia-smi");
    fs::write(&smi, "#!/bin/sh\nprintf '0, Default, GPU-aaaa\\n1, Default, GPU-bbbb\\n'\n").unwrap();
    fs::set_permissions(&smi, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `cake-evolve-kernel ARGS` in `cwd` with the stand-ins, and `env` on top.
fn kevo(host: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let path = format!("{}:{}", host.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut c = Command::new(env!("CARGO_BIN_EXE_cake-evolve-kernel"));
    c.args(args).current_dir(cwd).env("CAKE_BIN", stand_in()).env("PATH", path).env("STAND_IN_FAIL_BY_HASH", "1").env_remove("CUDA_VISIBLE_DEVICES");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("cake-evolve-kernel runs")
}

/// (seq, status, headline ms) of every evaluation, in candidate order.
fn evaluations(db: &Path) -> Vec<(i64, String, Option<f64>)> {
    let mut v: Vec<_> = Db::open_existing(db).unwrap().evaluations().unwrap().into_iter().map(|e| (e.seq, e.status, e.headline_ms)).collect();
    v.sort_by_key(|e| e.0);
    v
}

fn search(host: &Path, name: &str, gpus: Option<&str>, env: &[(&str, &str)]) -> (Output, Vec<(i64, String, Option<f64>)>) {
    let cwd = host.join(name);
    fs::create_dir_all(&cwd).unwrap();
    let c = contract("gemm-bf16.toml");
    let mut args = vec!["run", c.to_str().unwrap(), "--db", "k.sqlite", "--seed", "4", "--budget-evals", "10", "--evidence", "ev", "--format", "json"];
    if let Some(g) = gpus {
        args.extend(["--gpus", g]);
    }
    let out = kevo(host, &cwd, &args, env);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    let evals = evaluations(&cwd.join("k.sqlite"));
    (out, evals)
}

#[test]
fn two_gpus_evaluate_the_same_candidates_with_the_same_verdicts_as_one() {
    let h = host();
    let (one_out, one) = search(h.path(), "one", None, &[]);
    let log = h.path().join("gpus.log");
    let log_s = log.to_str().unwrap();
    let (two_out, two) = search(h.path(), "two", Some("all"), &[("STAND_IN_GPU_LOG", log_s)]);
    assert_eq!(one.len(), 10, "{one:?}");
    assert!(one.iter().any(|e| e.1 == "passed") && one.iter().any(|e| e.1 == "failed"), "the stand-in makes both: {one:?}");
    assert_eq!(one, two, "one GPU and two evaluate the same candidates alike");
    let (a, b) = (json(&one_out), json(&two_out));
    assert_eq!(a["best"], b["best"]);
    assert_eq!(a["order"], b["order"], "the same candidates in the same order");
    // Both GPUs took calls, and each call saw one GPU, by its UUID (CUDA's device order is not
    // nvidia-smi's).
    let calls = fs::read_to_string(&log).unwrap();
    let on = |g: &str| calls.lines().filter(|l| l.split(' ').next() == Some(g)).count();
    assert!(on("GPU-aaaa") > 0 && on("GPU-bbbb") > 0, "{calls}");
    assert_eq!(on("GPU-aaaa") + on("GPU-bbbb"), calls.lines().count(), "{calls}");
}

#[test]
fn a_dead_workers_candidate_is_evaluated_again_on_another_gpu() {
    let h = host();
    let (_, one) = search(h.path(), "one", None, &[]);
    let log = h.path().join("gpus.log");
    let log_s = log.to_str().unwrap();
    // Every call on GPU 1 dies: each generation its worker stops at its first candidate, which GPU 0
    // evaluates again with the rest.
    let (_, two) = search(h.path(), "two", Some("0,1"), &[("STAND_IN_GPU_LOG", log_s), ("STAND_IN_DIE_ON_GPU", "GPU-bbbb")]);
    assert_eq!(one, two, "nothing is lost or misjudged when a worker dies");
    // GPU 1's worker stops at its first death in a generation (each generation starts one worker
    // per GPU again: a death may be passing), and every candidate whose call died ran again on GPU 0.
    let calls = fs::read_to_string(&log).unwrap();
    let died: Vec<&str> = calls.lines().filter(|l| l.starts_with("GPU-bbbb ")).collect();
    assert!(!died.is_empty(), "{calls}");
    for d in &died {
        let hash = d.split(' ').nth(2).unwrap();
        assert!(calls.lines().any(|l| l.starts_with("GPU-aaaa ") && l.ends_with(hash)), "the dead call's candidate {hash} ran again on GPU 0: {calls}");
    }
}

#[test]
fn a_bad_gpus_value_is_a_coded_error() {
    let h = host();
    let c = contract("gemm-bf16.toml");
    for (value, code) in [("0,7", "G013"), ("zero", "G011"), ("3", "G013")] {
        let out = kevo(h.path(), h.path(), &["run", c.to_str().unwrap(), "--db", "x.sqlite", "--gpus", value], &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("error[{code}]")) && err.contains("help:"), "{value}: {err}");
    }
}
