//! GPU-tier runtime tests: the examples run and pass their oracles. Every test here needs a GPU
//! (its name starts with `needs_gpu_`): `scripts/test.sh` leaves them out on a machine without one
//! (CI), and the runner counts them skipped. Run where no GPU is found, each fails.
//! `scripts/device-check.sh` runs the same through the release binary on the H200 machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use cake::runtime::record::read_records;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run_example(args: &[&str]) -> Vec<cake::runtime::record::RunRecord> {
    let ev = tempfile::tempdir().unwrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["--evidence", ev.path().to_str().unwrap()]);
    let out = Command::new(env!("CARGO_BIN_EXE_cake")).args(&all).current_dir(root()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let recs: Vec<_> = read_records(ev.path()).unwrap().into_iter().map(|(_, r)| r).collect();
    // This test needs a GPU (and the toolchain): without them it fails, it does not skip.
    assert_ne!(out.status.code(), Some(3), "no GPU on this machine (`cake` skipped every run); scripts/test.sh leaves the needs_gpu_ tests out where none is found\n{stderr}");
    assert!(
        !recs.iter().any(|r| r.error.as_ref().is_some_and(|e| e.class.starts_with("build_N00"))),
        "no CUDA toolchain (NVRTC); run through scripts/test.sh\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    recs
}

#[test]
fn needs_gpu_gemm_ws_passes_its_oracle() {
    let recs = run_example(&[
        "run",
        "examples/gemm_bf16_ws.cake",
        "--shape",
        "M=256,N=512,K=128",
        "--dist",
        "normal",
        "--dist",
        "ties",
    ]);
    assert_eq!(recs.len(), 2);
    for r in recs {
        assert_eq!(r.verdict.name(), "pass", "{r:?}");
        assert!(r.checks.iter().any(|c| c.oracle == "matmul_abt"));
        assert!(r.times_ms.is_some());
    }
}

#[test]
fn needs_gpu_kmeans_passes_its_oracle() {
    let recs = run_example(&["run", "examples/kmeans_assign.cake", "--shape", "B=2,N=256,K=256,D=128", "--dist", "ties"]);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].verdict.name(), "pass", "{:?}", recs[0]);
}

#[test]
fn needs_gpu_gemm_bench_times_cublas_in_the_same_run() {
    let recs = run_example(&[
        "bench",
        "examples/gemm_bf16_ws.cake",
        "--shape",
        "M=1024,N=1024,K=1024",
        "--repeats",
        "5",
        "--baseline",
        "cublas",
    ]);
    let b = recs[0].baseline.as_ref().expect("a cuBLAS baseline");
    assert!(b.speed_ratio > 0.0);
}
