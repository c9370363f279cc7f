//! `cake run` / `cake bench` end to end on any machine: without a GPU every run is `skipped`
//! (exit 3) and still leaves a content-addressed run record; usage errors exit 2; a program the
//! verifier rejects runs only with `--unsafe-skip-verify` and is then recorded as unverified.

use std::path::{Path, PathBuf};
use std::process::Command;

use cake::runtime::record::{read_records, sha256_hex};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cake(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cake")).args(args).current_dir(root()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn evidence() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn run_without_a_gpu_skips_and_records() {
    let ev = evidence();
    let evs = ev.path().to_str().unwrap();
    let (code, stdout, stderr) = cake(&[
        "run",
        "examples/gemm_bf16_ws.cake",
        "--shape",
        "M=128,N=256,K=64",
        "--dist",
        "normal",
        "--evidence",
        evs,
    ]);
    let recs = read_records(ev.path()).unwrap();
    assert_eq!(recs.len(), 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let (path, rec) = &recs[0];
    // Content addressing: the file name is the SHA-256 of the file's bytes.
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(path.file_stem().unwrap().to_str().unwrap(), sha256_hex(&bytes));
    // The program hash is that of the canonical text.
    let src = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.cake")).unwrap();
    let canonical = cake::syntax::print(&cake::syntax::parse(&src).unwrap());
    assert_eq!(rec.program.sha256, sha256_hex(canonical.as_bytes()));
    assert_eq!(rec.schema, "cake.run-record/1");
    assert_eq!(rec.program.name, "gemm_bf16_ws");
    assert!(!rec.program.unverified);
    assert_eq!(rec.workload.as_ref().unwrap().oracle, "matmul_abt");
    let build_failed = rec.error.as_ref().is_some_and(|e| e.class.starts_with("build_"));
    if !build_failed {
        assert_eq!(rec.shape["M"], 128);
        assert_eq!(rec.dist, "normal");
        // sm_90a is calibrated: the record carries the cost model's prediction for this shape,
        // which mining compares with the measured time.
        let p = rec.prediction.as_ref().expect("a prediction for a calibrated target");
        assert!(p.predicted_ms > 0.0 && !p.bottleneck.is_empty(), "{p:?}");
    }
    match code {
        3 => {
            assert_eq!(rec.verdict.name(), "skipped");
            assert_eq!(rec.error.as_ref().unwrap().class, "no_gpu");
            assert!(rec.ptxas.is_some(), "the build ran: ptxas facts are recorded");
            assert!(stdout.contains("skipped"), "{stdout}");
            eprintln!("SKIP (no GPU): {}", rec.error.as_ref().unwrap().message);
        }
        1 if rec.error.as_ref().is_some_and(|e| e.class.starts_with("build_N00")) => {
            eprintln!("SKIP (no NVRTC): {}", rec.error.as_ref().unwrap().message);
        }
        0 => assert_eq!(rec.verdict.name(), "pass"),
        _ => panic!("exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
    }
}

#[test]
fn bad_shapes_and_workloads_are_usage_errors() {
    let ev = evidence();
    let evs = ev.path().to_str().unwrap();
    let (code, _, stderr) =
        cake(&["run", "examples/gemm_bf16_ws.cake", "--shape", "M=100,N=256,K=64", "--evidence", evs]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a multiple of 128"), "{stderr}");
    let (code, _, stderr) = cake(&["run", "examples/gemm_bf16_ws.cake", "--shape", "M=128,N=256", "--evidence", evs]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no value for dim `K`"), "{stderr}");
    let (code, _, stderr) =
        cake(&["run", "examples/gemm_bf16_ws.cake", "--shape", "M=128,N=256,K=64,Q=1", "--evidence", evs]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no dim `Q`"), "{stderr}");
    let (code, _, stderr) =
        cake(&["run", "examples/gemm_bf16_ws.cake", "--workload", "examples/nope.toml", "--evidence", evs]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read the workload spec"), "{stderr}");
    // A timing-only workload (oracle `none`) has no peer GEMM for cuBLAS to run.
    let (code, _, stderr) = cake(&[
        "bench",
        "calibration/microbench/sm_90a/launch_empty.cake",
        "--workload",
        "calibration/microbench/sm_90a/launch.workload.toml",
        "--baseline",
        "cublas",
        "--evidence",
        evs,
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("needs a workload with a peer GEMM"), "{stderr}");
    assert!(read_records(ev.path()).unwrap().is_empty(), "usage errors write no records");
}

/// The copy and transpose oracles through the CLI, on corpus programs: `cake run` builds and runs
/// them (skipped without a GPU, checked exactly with one); `cake bench --baseline cublas` is a
/// usage error, since there is no peer GEMM to time.
#[test]
fn copy_and_transpose_workloads_run_through_the_cli() {
    let corpus = cake::corpus::Corpus::load(root().join("corpus")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (case, oracle) in [("tma-copy/sm_90a-bf16-128x64-s4-sw128", "copy"), ("tma-transpose/sm_90a-bf16-64x64-s2-w4", "transpose")] {
        let c = corpus.cases.iter().find(|c| c.id == case).unwrap_or_else(|| panic!("no case {case}"));
        let program = dir.path().join(format!("{oracle}.cake"));
        let workload = dir.path().join(format!("{oracle}.workload.toml"));
        std::fs::write(&program, &c.source).unwrap();
        std::fs::write(
            &workload,
            format!("oracle = \"{oracle}\"\nheadline = {{ R = 1024, C = 512 }}\nshapes = [{{ R = 256, C = 128 }}]\n"),
        )
        .unwrap();
        let (p, w) = (program.to_str().unwrap(), workload.to_str().unwrap());
        let ev = evidence();
        let evs = ev.path().to_str().unwrap();
        let (code, _, stderr) = cake(&["bench", p, "--workload", w, "--baseline", "cublas", "--evidence", evs]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("needs a workload with a peer GEMM") && stderr.contains(oracle), "{stderr}");
        let (code, stdout, stderr) = cake(&["run", p, "--workload", w, "--dist", "normal", "--evidence", evs]);
        let recs = read_records(ev.path()).unwrap();
        assert_eq!(recs.len(), 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
        let rec = &recs[0].1;
        assert_eq!(rec.workload.as_ref().unwrap().oracle, oracle);
        match code {
            3 => {
                assert_eq!(rec.error.as_ref().unwrap().class, "no_gpu", "{stderr}");
                eprintln!("SKIP (no GPU): {case}: {}", rec.error.as_ref().unwrap().message);
            }
            1 if rec.error.as_ref().is_some_and(|e| e.class.starts_with("build_N00")) => {
                eprintln!("SKIP (no NVRTC): {}", rec.error.as_ref().unwrap().message);
            }
            0 => {
                assert_eq!(rec.verdict.name(), "pass");
                let check = &rec.checks[0];
                assert_eq!((check.oracle.as_str(), check.checked, check.mismatches), (oracle, 256 * 128, 0));
            }
            _ => panic!("{case}: exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}"),
        }
    }
}

#[test]
fn a_rejected_program_runs_only_unverified() {
    let ev = evidence();
    let evs = ev.path().to_str().unwrap();
    let (code, _, stderr) =
        cake(&["run", "examples/broken/tx_mismatch.cake", "--shape", "M=128,N=256,K=64", "--evidence", evs]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("nothing ran"), "{stderr}");
    assert!(read_records(ev.path()).unwrap().is_empty());

    let (code, _, stderr) = cake(&[
        "run",
        "examples/broken/tx_mismatch.cake",
        "--unsafe-skip-verify",
        "--shape",
        "M=128,N=256,K=64",
        "--dist",
        "normal",
        "--timeout",
        "20",
        "--evidence",
        evs,
    ]);
    let recs = read_records(ev.path()).unwrap();
    assert_eq!(recs.len(), 1, "{stderr}");
    let rec = &recs[0].1;
    assert!(rec.program.unverified);
    assert!(rec.program.findings.iter().any(|c| c == "V101"), "{:?}", rec.program.findings);
    // Without a GPU: skipped (exit 3); on a GPU: the hang is a timeout (exit 1); a lowering that
    // cannot build it yet: a build error record (exit 1).
    match (code, rec.verdict.name()) {
        (3, "skipped") | (1, "timeout") => {}
        (1, "error") if rec.error.as_ref().is_some_and(|e| e.class.starts_with("build_")) => {
            eprintln!("note: the tx-mismatch program does not build yet: {}", rec.error.as_ref().unwrap().message)
        }
        other => panic!("{other:?}: {rec:?}\n{stderr}"),
    }
}

#[test]
fn the_gpu_probe_answers_json() {
    let (code, stdout, _) = cake(&["__probe-gpu"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    if v["gpu"].is_null() {
        assert_eq!(v["error"]["class"], "no_gpu", "{v}");
        eprintln!("SKIP (no GPU): {}", v["error"]["message"]);
    } else {
        assert!(v["gpu"]["sm_count"].as_u64().unwrap() > 0);
    }
}

#[test]
fn lower_prints_cuda_and_build_writes_the_build_dir() {
    let (code, stdout, stderr) = cake(&["lower", "examples/gemm_bf16_ws.cake"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("extern \"C\" __global__"), "{stdout}");
    assert!(stdout.contains("__grid_constant__ CUtensorMap A_tmap"), "{stdout}");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("build");
    let (code, stdout, stderr) = cake(&["build", "examples/gemm_bf16_ws.cake", "-o", out.to_str().unwrap()]);
    if code == 1 && stderr.contains("N001") {
        eprintln!("SKIP (no NVRTC): {stderr}");
        return;
    }
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("registers"), "{stdout}");
    for f in ["kernel.cu", "kernel.cubin", "launch.json", "ptxas.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let launch: cake::lower::LaunchSpec = serde_json::from_str(&std::fs::read_to_string(out.join("launch.json")).unwrap()).unwrap();
    assert_eq!(launch.entry, "gemm_bf16_ws");
}
