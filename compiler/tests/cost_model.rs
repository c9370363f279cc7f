//! The cost model (`cake::cost`) on the example programs: bottlenecks at the headline shapes,
//! monotonicity, errors, calibration loading, and JSON snapshots of the two Hopper examples.
//!
//! The numbers asserted here are the model's with the initial `calibration/sm_90a.toml`; the
//! GPU-data checks (Spearman, MAPE over corpus measurements) come with the calibration runner.

use std::collections::BTreeMap;

use cake::cost::{self, Bottleneck, Calibration, CostError, Estimate};
use cake::diag::Severity;
use cake::verify::Validated;

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../examples/{name}.cake", env!("CARGO_MANIFEST_DIR"))).expect("example exists")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}.cake", env!("CARGO_MANIFEST_DIR"))).expect("fixture exists")
}

/// The verified program; a variant the verifier rejects is still costed (unverified), so the
/// sweeps below do not depend on the verifier's coverage.
fn program(source: &str) -> Validated {
    let out = cake::check::check_source(source);
    match out.validated {
        Some(v) => v,
        None => Validated::assume_verified_unsafe(out.module.unwrap_or_else(|| panic!("does not type-check: {:?}", out.diagnostics))),
    }
}

fn shape(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn sm90() -> &'static Calibration {
    cost::builtin_calibration("sm_90a").expect("sm_90a is calibrated")
}

fn gemm(m: i64, n: i64, k: i64) -> Estimate {
    cost::estimate(&program(&example("gemm_bf16_ws")), sm90(), &shape(&[("M", m), ("N", n), ("K", k)])).expect("estimate")
}

fn kmeans(b: i64, n: i64, k: i64, d: i64) -> Estimate {
    cost::estimate(&program(&example("kmeans_assign")), sm90(), &shape(&[("B", b), ("N", n), ("K", k), ("D", d)])).expect("estimate")
}

fn codes(e: &Estimate) -> Vec<&str> {
    e.hints.iter().map(|h| h.code.as_str()).collect()
}

// ---- bottlenecks at the headline shapes --------------------------------------------------------

#[test]
fn gemm_8192_cubed_is_tensor_core_bound() {
    let e = gemm(8192, 8192, 8192);
    assert_eq!(e.bottleneck, Bottleneck::TensorCore, "{e:#?}");
    assert!(e.bottleneck_share > 0.9, "{}", e.bottleneck_share);
    // Between the raw wgmma rate measured on the H200 (929 TFLOP/s) and half of it.
    let t = e.tflops.unwrap();
    assert!((465.0..929.0).contains(&t), "{t} TFLOP/s");
    assert!((e.components.total_ms() - e.predicted_ms).abs() < 1e-12);
    // 4 stages cover the TMA round trip: no bubble, no stage hint.
    assert_eq!(e.pipelines[0].bubble_ns_per_handoff, 0.0);
    assert!(!codes(&e).contains(&"C001"), "{:?}", codes(&e));
}

#[test]
fn gemm_small_k_is_memory_or_latency_bound() {
    for k in [64, 128, 256] {
        let e = gemm(8192, 8192, k);
        assert!(
            matches!(e.bottleneck, Bottleneck::Memory | Bottleneck::LatencySync),
            "K={k}: {} ({:?})",
            e.bottleneck,
            e.components
        );
        // The 128 MB C write (register stores, 16 useful bytes of every 128) dominates.
        assert!(e.components.memory_ms > 0.33 * e.predicted_ms, "K={k}: {:?}", e.components);
    }
}

/// kmeans assign at the headline shape (B=32, N=65536, K=1024, D=128), in the serialized form of
/// `fixtures/kmeans_assign_serial.cake` (each warpgroup waits for its own MMAs, then reduces) and
/// the software-pipelined `examples/kmeans_assign.cake` (tile k's MMAs run while tile k−1 is
/// reduced). Per 128-centroid step a consumer warpgroup does 2.1 MFLOP of wgmma and, per distance
/// element, one FMA, one min-tree step and the argmin's index pass (compare, select, integer min:
/// `arg_index_alu_slots`), so tensor cores and ALUs carry comparable work; they overlap only in
/// part (`tensor_issue_overlap`). On the H200 with the branch-free reductions: 1.47 ms (serial)
/// and 1.11 ms (pipelined), tensor floor about 0.6 ms. The model names the epilogue for both,
/// predicts the pipelined form faster, and hints at the serial form's `wgmma_wait(0)` (C003) and
/// its 1-stage `xp` pipeline (C001) — hints the pipelined form no longer gets.
#[test]
fn kmeans_headline_is_epilogue_bound() {
    let dims = shape(&[("B", 32), ("N", 65536), ("K", 1024), ("D", 128)]);
    let src = fixture("kmeans_assign_serial");
    let serial = cost::estimate(&program(&src), sm90(), &dims).expect("estimate");
    assert_eq!(serial.bottleneck, Bottleneck::Epilogue, "{serial:#?}");
    let c = codes(&serial);
    assert!(c.contains(&"C003") && c.contains(&"C001"), "{c:?}");
    let c003 = serial.hints.iter().find(|h| h.code == "C003").unwrap();
    assert_eq!(&src[c003.primary.span.start as usize..c003.primary.span.end as usize], "wgmma_wait(0)");
    let c001 = serial.hints.iter().find(|h| h.code == "C001").unwrap();
    assert!(c001.message.contains("`xp`"), "{}", c001.message);
    assert_eq!(&src[c001.primary.span.start as usize..c001.primary.span.end as usize], "stages 1");
    let pipelined = kmeans(32, 65536, 1024, 128);
    assert_eq!(pipelined.bottleneck, Bottleneck::Epilogue, "{pipelined:#?}");
    assert!(pipelined.predicted_ms < serial.predicted_ms, "{} vs {}", pipelined.predicted_ms, serial.predicted_ms);
    assert!(!codes(&pipelined).contains(&"C003"), "{:?}", codes(&pipelined));
}

/// A warp's reduction of a row window (as lowered: each lane folds C/32 elements in order, then
/// a 5-step butterfly) chains C/32 + 5 dependent steps, not C: on the H200 this RMSNorm runs in
/// 0.094 ms at R = 16384, C = 4096 (benchmarks/RESULTS.md), memory-bound, while a chain over the
/// whole row per warp predicted 0.18 ms, latency-bound.
#[test]
fn a_row_window_reduction_chains_one_lanes_share() {
    let root = format!("{}/../corpus", env!("CARGO_MANIFEST_DIR"));
    let corpus = cake::corpus::Corpus::load(&root).expect("corpus loads");
    let case = corpus.cases.iter().find(|c| c.id == "rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16").expect("the case");
    let e = cost::estimate(&program(&case.source), sm90(), &shape(&[("R", 16384)])).expect("estimate");
    assert_eq!(e.bottleneck, Bottleneck::Memory, "{e:#?}");
    let path_ms = e.roles.iter().map(|r| r.path_ms).fold(0.0, f64::max);
    assert!(path_ms < e.predicted_ms, "role path {path_ms} ms of {} ms predicted", e.predicted_ms);
}

/// Each step group of a row's element loop waits for a memory round trip (plus its queue behind
/// every resident warp's bytes), so a schedule with few warps per SM exposes its latency. On the
/// H200 at R = 16384 (benchmarks/RESULTS.md) the 4-warp persistent RMSNorm took 0.144 ms and the
/// same rows in 8-warp blocks 0.094 ms, memory-bound: both within 15%, in that order, the
/// persistent one with the longer exposed latency.
#[test]
fn row_schedules_rank_and_bind_as_measured() {
    let root = format!("{}/../corpus", env!("CARGO_MANIFEST_DIR"));
    let corpus = cake::corpus::Corpus::load(&root).expect("corpus loads");
    let estimate = |id: &str| {
        let case = corpus.cases.iter().find(|c| c.id == id).expect("the case");
        cost::estimate(&program(&case.source), sm90(), &shape(&[("R", 16384)])).expect("estimate")
    };
    let persistent = estimate("rmsnorm/sm_90a-bf16-c4096-w4x2-p");
    let blocks = estimate("rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16");
    assert!((persistent.predicted_ms / 0.144 - 1.0).abs() < 0.15, "{persistent:#?}");
    assert!((blocks.predicted_ms / 0.094 - 1.0).abs() < 0.15, "{blocks:#?}");
    assert_eq!(blocks.bottleneck, Bottleneck::Memory, "{blocks:#?}");
    assert!(blocks.predicted_ms < persistent.predicted_ms, "{} vs {}", blocks.predicted_ms, persistent.predicted_ms);
    assert!(persistent.components.sync_latency_ms > 2.0 * blocks.components.sync_latency_ms, "{persistent:#?}");
}

/// C007: a persistent 4-warp row kernel (thread-level loads, no pipeline) gets the hint on its
/// `persistent`; the same rows in 8-warp blocks without `persistent` do not.
#[test]
fn a_persistent_grid_of_few_warps_in_a_streaming_kernel_is_hinted() {
    let root = format!("{}/../corpus", env!("CARGO_MANIFEST_DIR"));
    let corpus = cake::corpus::Corpus::load(&root).expect("corpus loads");
    let source = |id: &str| corpus.cases.iter().find(|c| c.id == id).expect("the case").source.clone();
    let dims = shape(&[("R", 16384)]);
    let src = source("rmsnorm/sm_90a-bf16-c4096-w4x2-p");
    let e = cost::estimate(&program(&src), sm90(), &dims).expect("estimate");
    let c007 = e.hints.iter().find(|h| h.code == "C007").unwrap_or_else(|| panic!("{:?}", codes(&e)));
    assert_eq!(&src[c007.primary.span.start as usize..c007.primary.span.end as usize], "persistent");
    assert!(c007.message.contains("4 warps"), "{}", c007.message);
    let e = cost::estimate(&program(&source("rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16")), sm90(), &dims).expect("estimate");
    assert!(!codes(&e).contains(&"C007"), "{:?}", codes(&e));
    // A persistent TMA copy of 2 warps keeps its copies in flight through the pipeline.
    let e = cost::estimate(&program(&source("tma-copy/sm_90a-bf16-128x64-s4-sw128")), sm90(), &shape(&[("R", 8192), ("C", 8192)])).expect("estimate");
    assert!(!codes(&e).contains(&"C007"), "{:?}", codes(&e));
}

#[test]
fn hints_are_hints_with_cost_codes() {
    for e in [gemm(8192, 8192, 1024), gemm(8192, 8192, 64), kmeans(32, 65536, 1024, 128), gemm(256, 256, 8192)] {
        for h in &e.hints {
            assert_eq!(h.severity, Severity::Hint);
            assert!(h.code.starts_with("C0") && h.code.len() == 4, "{}", h.code);
        }
    }
    // A heavier epilogue after the main loop (an exp per element) is exposed: C002 points at
    // the role that runs it in all its warpgroups at once.
    // (Three exps per element, at a tensor-bound shape, so the exposed part is well over the 2%
    // the hint needs.)
    let src = example("gemm_bf16_ws").replace("cast(acc, bf16)", "cast(exp(acc) * exp(acc + 1.0) * exp(acc + 2.0), bf16)");
    assert!(src.contains("exp(acc)"));
    let e = cost::estimate(&program(&src), sm90(), &shape(&[("M", 8192), ("N", 8192), ("K", 8192)])).unwrap();
    let c002 = e.hints.iter().find(|h| h.code == "C002").unwrap_or_else(|| panic!("C002: {:?} {:?}", codes(&e), e.components));
    assert!(src[c002.primary.span.start as usize..].starts_with("role mma"));
    // A tiny grid leaves SMs idle (C005).
    assert!(codes(&gemm(256, 256, 8192)).contains(&"C005"));
}

// ---- monotonicity ------------------------------------------------------------------------------

#[test]
fn more_k_takes_more_time() {
    let mut last = 0.0;
    for k in [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384] {
        let t = gemm(8192, 8192, k).predicted_ms;
        assert!(t > last, "GEMM K={k}: {t} ms after {last} ms");
        last = t;
    }
    let mut last = 0.0;
    for k in [128, 256, 512, 1024, 2048, 4096] {
        let t = kmeans(32, 65536, k, 128).predicted_ms;
        assert!(t > last, "kmeans K={k}: {t} ms after {last} ms");
        last = t;
    }
}

#[test]
fn more_stages_never_predict_more_bubbles() {
    // Same program with 1..=8 stages on the main pipeline (its buffers keep their 4 stages, so
    // shared memory and occupancy stay the same; only the hand-off depth changes).
    for (name, pipe, dims) in [
        ("gemm_bf16_ws", "pipeline ab: stages 4", shape(&[("M", 8192), ("N", 8192), ("K", 8192)])),
        ("gemm_bf16_ws", "pipeline ab: stages 4", shape(&[("M", 8192), ("N", 8192), ("K", 256)])),
        ("kmeans_assign", "pipeline cs: stages 4", shape(&[("B", 32), ("N", 65536), ("K", 1024), ("D", 128)])),
        ("kmeans_assign", "pipeline cs: stages 4", shape(&[("B", 32), ("N", 65536), ("K", 128), ("D", 128)])),
    ] {
        let src = example(name);
        assert!(src.contains(pipe));
        let mut last: Option<(f64, Vec<f64>)> = None;
        for s in 1..=8 {
            let variant = src.replace(pipe, &pipe.replace("stages 4", &format!("stages {s}")));
            let e = cost::estimate(&program(&variant), sm90(), &dims).expect("estimate");
            let bubbles: Vec<f64> = e.pipelines.iter().map(|p| p.bubble_ns_per_handoff).collect();
            if let Some((prev_total, prev)) = &last {
                assert!(e.components.fill_bubble_ms <= prev_total + 1e-12, "{name} stages {s}: {} > {prev_total}", e.components.fill_bubble_ms);
                for (b, p) in bubbles.iter().zip(prev) {
                    // Equal up to rounding: more stages never predict more bubble.
                    assert!(*b <= p + 1e-9 * p.abs().max(1.0), "{name} stages {s}: bubble {b} > {p}");
                }
            }
            if s == 1 && name == "gemm_bf16_ws" {
                assert!(e.pipelines[0].bubble_ns_per_handoff > 0.0, "1 stage cannot cover the round trip");
                assert!(codes(&e).contains(&"C001"), "{:?}", codes(&e));
            }
            last = Some((e.components.fill_bubble_ms, bubbles));
        }
    }
}

// ---- errors ------------------------------------------------------------------------------------

/// A small program for a target without a calibration file.
const SM100: &str = "kernel scale target sm_100a

dim N multiple_of 128

in X: f32[N]
out Y: f32[N]

grid tiles[n = N / 128]

role all: warpgroup 0

on all {
    for t in tiles {
        store(Y[t.n * 128 :+ 128], X[t.n * 128 :+ 128])
    }
}
";

#[test]
fn sm100a_is_not_calibrated() {
    let v = program(SM100);
    let err = cost::estimate_builtin(&v, &shape(&[("N", 1 << 20)])).unwrap_err();
    assert_eq!(err, CostError::NotCalibrated { target: "sm_100a".into() });
    assert_eq!(err.code(), "C100");
    assert!(err.to_string().contains("not calibrated"));
    // Never borrowed: sm_90a numbers are refused for an sm_100a program.
    let err = cost::estimate(&v, sm90(), &shape(&[("N", 1 << 20)])).unwrap_err();
    assert_eq!(err.code(), "C104", "{err}");
    assert!(matches!(cost::builtin_calibration("sm_100a"), Err(CostError::NotCalibrated { .. })));
}

#[test]
fn missing_dims_are_a_coded_error() {
    let src = example("gemm_bf16_ws");
    let err = cost::estimate(&program(&src), sm90(), &shape(&[("M", 8192), ("N", 8192)])).unwrap_err();
    assert_eq!(err.code(), "C101");
    let CostError::MissingDims { dims } = &err else { panic!("{err:?}") };
    assert_eq!(dims.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["K"]);
    let d = err.to_diagnostic();
    assert_eq!(d.code, "C101");
    assert_eq!(&src[d.primary.span.start as usize..d.primary.span.end as usize], "K");
    // Values the program cannot take are coded too.
    let err = cost::estimate(&program(&src), sm90(), &shape(&[("M", 8192), ("N", 8192), ("K", 100)])).unwrap_err();
    assert_eq!(err.code(), "C102", "{err}");
    let err = cost::estimate(&program(&src), sm90(), &shape(&[("M", 8192), ("N", 8192), ("K", -64)])).unwrap_err();
    assert_eq!(err.code(), "C102", "{err}");
}

// ---- calibration files -------------------------------------------------------------------------

fn builtin_text() -> String {
    std::fs::read_to_string(format!("{}/../calibration/sm_90a.toml", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The frozen calibration the snapshots use (`tests/fixtures/sm_90a.calibration.toml`), so that
/// an accepted recalibration of `calibration/sm_90a.toml` leaves them alone.
fn pinned() -> Calibration {
    let text = std::fs::read_to_string(format!("{}/tests/fixtures/sm_90a.calibration.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    Calibration::from_toml_str("compiler/tests/fixtures/sm_90a.calibration.toml", &text).expect("the pinned calibration loads")
}

#[test]
fn calibration_files_are_checked() {
    let text = builtin_text();
    assert!(Calibration::from_toml_str("ok.toml", &text).is_ok());
    let missing = text.replace("[param.bar_sync_ns]", "[param.bar_sync_ns_typo]");
    let e = Calibration::from_toml_str("typo.toml", &missing).unwrap_err();
    assert!(e.message.contains("unknown parameter `bar_sync_ns_typo`"), "{e}");
    // Edit the parsed data, not the text, so the test holds whatever values are calibrated.
    let with = |name: &str, key: &str, v: toml::Value| -> String {
        let mut doc: toml::Table = text.parse().unwrap();
        doc["param"].as_table_mut().unwrap()[name].as_table_mut().unwrap().insert(key.into(), v);
        doc.to_string()
    };
    let e = Calibration::from_toml_str("unit.toml", &with("mbarrier_handoff_ns", "unit", toml::Value::String("cycles".into()))).unwrap_err();
    assert!(e.message.contains("unit `cycles`, expected `ns`"), "{e}");
    assert!(Calibration::from_toml_str("frac.toml", &with("tensor_sustained_fraction", "value", toml::Value::Float(1.85))).is_err());
    // A parameter left out is an error, not a default.
    let start = text.find("[param.cta_wave_ns]").unwrap();
    let end = start + text[start..].find("\n\n").unwrap();
    let cut = format!("{}{}", &text[..start], &text[end..]);
    let e = Calibration::from_toml_str("cut.toml", &cut).unwrap_err();
    assert!(e.message.contains("missing parameter(s): cta_wave_ns"), "{e}");
}

#[test]
fn provisional_parameters_are_reported() {
    let e = gemm(8192, 8192, 8192);
    assert!(e.calibration.provisional_used.iter().any(|p| p == "tensor_sustained_fraction"));
    assert!(e.notes.iter().any(|n| n.contains("provisional") && n.contains("tensor_sustained_fraction")));
    // A measured parameter is not listed.
    assert!(!e.calibration.provisional_used.iter().any(|p| p == "dram_bytes_per_s"));
}

#[test]
fn a_recalibration_changes_the_prediction() {
    // Double the DRAM and L2 bandwidths: a memory-bound shape gets faster, a tensor-bound one not.
    // Scale the parameters in the file's data (not its text), so the test holds whatever values
    // the accepted calibration has.
    let mut doc: toml::Table = builtin_text().parse().unwrap();
    for name in ["dram_bytes_per_s", "l2_bytes_per_s", "l2_shared_bytes_per_s"] {
        let value = &doc["param"][name]["value"];
        let value = value.as_float().or(value.as_integer().map(|i| i as f64)).unwrap();
        doc["param"].as_table_mut().unwrap()[name].as_table_mut().unwrap().insert("value".into(), toml::Value::Float(value * 2.0));
    }
    let fast = Calibration::from_toml_str("proposal.toml", &doc.to_string()).unwrap();
    let small_k = shape(&[("M", 8192), ("N", 8192), ("K", 64)]);
    let v = program(&example("gemm_bf16_ws"));
    let before = cost::estimate(&v, sm90(), &small_k).unwrap().predicted_ms;
    let after = cost::estimate(&v, &fast, &small_k).unwrap().predicted_ms;
    assert!(after < 0.7 * before, "{after} vs {before}");
    let big = shape(&[("M", 8192), ("N", 8192), ("K", 8192)]);
    let before = cost::estimate(&v, sm90(), &big).unwrap().predicted_ms;
    let after = cost::estimate(&v, &fast, &big).unwrap().predicted_ms;
    assert!((after - before).abs() < 0.01 * before, "{after} vs {before}");
}

/// The non-persistent, cp.async path of the model, exercised with the sm_90a numbers relabelled
/// for sm_80. This is a code-path test only: `calibration/` has no sm_80 file and `cake cost`
/// refuses sm_80.
#[test]
fn non_persistent_cp_async_path_is_finite() {
    let text = builtin_text().replace("target = \"sm_90a\"", "target = \"sm_80\"");
    let fake = Calibration::from_toml_str("test-only-sm_80.toml", &text).unwrap();
    let v = program(&example("gemm_bf16_sm80"));
    assert!(matches!(cost::estimate_builtin(&v, &shape(&[("M", 4096), ("N", 4096), ("K", 4096)])), Err(CostError::NotCalibrated { .. })));
    let mut last = 0.0;
    for k in [256, 1024, 4096] {
        let e = cost::estimate(&v, &fake, &shape(&[("M", 4096), ("N", 4096), ("K", k)])).unwrap();
        assert!(e.predicted_ms.is_finite() && e.predicted_ms > last, "{e:#?}");
        assert!(!e.occupancy.persistent);
        assert!(e.occupancy.blocks_per_sm >= 1);
        last = e.predicted_ms;
    }
}

// ---- snapshots ---------------------------------------------------------------------------------

/// Round every number to 4 significant digits so the snapshot shows the model, not float noise.
fn rounded(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f != 0.0 => serde_json::json!(format!("{f:.3e}").parse::<f64>().unwrap()),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(rounded).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, rounded(v))).collect()),
        other => other,
    }
}

fn snapshot_json(name: &str, e: &Estimate) -> String {
    let src = example(name);
    serde_json::to_string_pretty(&rounded(cost::report::json(e, &format!("examples/{name}.cake"), &src))).unwrap()
}

#[test]
fn snapshot_gemm_bf16_ws_8192() {
    let e = cost::estimate(&program(&example("gemm_bf16_ws")), &pinned(), &shape(&[("M", 8192), ("N", 8192), ("K", 8192)])).expect("estimate");
    insta::assert_snapshot!("cost_gemm_bf16_ws_8192", snapshot_json("gemm_bf16_ws", &e));
}

#[test]
fn snapshot_kmeans_assign_headline() {
    let e = cost::estimate(&program(&example("kmeans_assign")), &pinned(), &shape(&[("B", 32), ("N", 65536), ("K", 1024), ("D", 128)])).expect("estimate");
    insta::assert_snapshot!("cost_kmeans_assign_headline", snapshot_json("kmeans_assign", &e));
}

// ---- the command line --------------------------------------------------------------------------

#[test]
fn cli_cost_json_and_errors() {
    let exe = env!("CARGO_BIN_EXE_cake");
    let file = format!("{}/../examples/gemm_bf16_ws.cake", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(exe)
        .args(["cost", &file, "--shape", "M=8192,N=8192,K=8192", "--message-format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bottleneck"], "tensor-core");
    assert!(v["predicted_ms"].as_f64().unwrap() > 0.0);

    let out = std::process::Command::new(exe).args(["cost", &file, "--shape", "M=8192", "--color", "never"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error[C101]"));

    let human = std::process::Command::new(exe)
        .args(["cost", &file, "--shape", "M=8192,N=8192,K=8192", "--color", "never"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("bottleneck   tensor-core"), "{text}");
    assert!(text.contains("TFLOP/s"), "{text}");

    let sm80 = format!("{}/../examples/gemm_bf16_sm80.cake", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(exe).args(["cost", &sm80, "--shape", "M=4096,N=4096,K=4096", "--color", "never"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not calibrated"));
}

/// Dims past what the kernel's 32-bit parameters hold get a coded error naming the dim, never
/// a panic or impossible figures (2^40 used to divide by zero in the tile walk).
#[test]
fn dims_past_32_bits_are_a_coded_error_not_a_panic() {
    let v = program(&example("gemm_bf16_ws"));
    for big in [1i64 << 31, 1 << 40, i64::MAX - 63] {
        let big = big / 256 * 256;
        let r = cost::estimate(&v, sm90(), &shape(&[("M", big), ("N", big), ("K", big)]));
        match r {
            Err(e @ CostError::BadDim { .. }) => {
                let d = e.to_diagnostic();
                assert_eq!(d.code, e.code());
                assert!(d.message.contains("32-bit"), "{}", d.message);
            }
            other => panic!("M = N = K = {big}: {other:?}"),
        }
    }
    // The largest representable shape still estimates, with finite figures.
    let edge = i64::from(i32::MAX) / 256 * 256;
    let e = cost::estimate(&v, sm90(), &shape(&[("M", edge), ("N", edge), ("K", edge / 64 * 64)])).expect("estimates");
    assert!(e.predicted_ms.is_finite() && e.predicted_ms > 0.0);
}

/// A role without `regs` holds at least its declared fragments: gemm-sm80's 2×2 warps of 64×64 f32
/// accumulators (128 registers a lane) with their bf16 operand fragments take 160 of the 233
/// registers ptxas gives the kernel, so two 128-thread blocks fit an SM, not the four that the
/// default register budget would allow; its 32×32 warps (48 fragment registers) keep the default.
#[test]
fn fragments_set_the_register_budget_of_roles_without_regs() {
    let corpus = cake::corpus::Corpus::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus")).unwrap();
    let case = |id: &str| corpus.cases.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no corpus case {id}")).source.clone();
    let dims = shape(&[("M", 8192), ("N", 8192), ("K", 8192)]);
    let big = cost::estimate(&program(&case("gemm-sm80/sm_90a-bf16-128x128-s3")), sm90(), &dims).unwrap();
    assert_eq!((big.occupancy.blocks_per_sm, big.occupancy.limited_by.as_str()), (2, "registers"), "{:?}", big.occupancy);
    let small = cost::estimate(&program(&case("gemm-sm80/sm_90a-f16-64x64-s4")), sm90(), &dims).unwrap();
    assert_eq!(small.occupancy.blocks_per_sm, 4, "{:?}", small.occupancy);
}
