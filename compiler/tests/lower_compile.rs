//! Compile tier: the example programs through NVRTC to cubins, with the ptxas report.
//!
//! The tests named `needs_toolchain_*` need the CUDA toolchain (`scripts/setup-cuda-toolchain.sh`,
//! then `. .toolchain/cuda/env.sh`, which `scripts/test.sh` does). `scripts/test.sh` leaves them
//! out where it is absent (`CAKE_SKIP_TOOLCHAIN=1`), and the runner counts them skipped; run
//! without it, they fail. The other tests (lowering, the ptxas report parser) need nothing.

use cake::lower::LowerOptions;
use cake::nvrtc::{self, BuildError, Built};
use cake::target::{TargetInfo, TargetTable};
use cake::verify::Validated;

fn source(name: &str) -> String {
    let path = format!("{}/../examples/{name}.cake", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn validated(src: &str) -> Validated {
    let out = cake::check::check_source(src);
    let module = out.module.unwrap_or_else(|| panic!("does not type-check: {:#?}", out.diagnostics));
    Validated::assume_verified_unsafe(module)
}

fn target(name: &str) -> &'static TargetInfo {
    TargetTable::builtin().get(name).unwrap_or_else(|| panic!("no target {name}"))
}

/// Fails the test unless NVRTC can be loaded.
fn toolchain() {
    nvrtc::ensure_nvrtc().unwrap_or_else(|e| panic!("no CUDA toolchain: {e}"));
}

fn build(name: &str, target_name: &str) -> Result<Built, BuildError> {
    let src = source(name);
    let file = format!("{}.cake", name.rsplit('/').next().unwrap_or(name));
    nvrtc::build_with(&validated(&src), target(target_name), &LowerOptions::with_source(&file, &src))
}

fn summary(name: &str, t: &str, b: &Built) -> String {
    let r = &b.report;
    format!(
        "{name} for {t}: {} threads, {} B dynamic smem, {} registers, spills {}/{} B, stack {} B, barriers {:?}, cubin {} B, warnings {:?}",
        b.launch.block_threads,
        b.launch.dynamic_smem_bytes,
        r.registers.unwrap_or(0),
        r.spill_store_bytes,
        r.spill_load_bytes,
        r.stack_frame_bytes,
        r.barriers,
        b.cubin.len(),
        r.warnings
    )
}

#[test]
fn needs_toolchain_examples_compile_to_cubins() {
    toolchain();
    for (name, t) in [("gemm_bf16_ws", "sm_90a"), ("kmeans_assign", "sm_90a"), ("gemm_bf16_sm80", "sm_80")] {
        let b = build(name, t).unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{}", summary(name, t, &b));
        assert_eq!(&b.cubin[..4], b"\x7fELF", "{name}: a cubin is an ELF image");
        assert_eq!(b.report.function, b.entry, "{name}: the report is about the entry");
        assert_eq!(b.report.arch, t);
        let regs = b.report.registers.expect("ptxas reports registers");
        assert!(regs > 0 && regs <= 255, "{name}: {regs} registers");
        // No run-time indexed register arrays and no spills in any example.
        assert_eq!(b.report.stack_frame_bytes, 0, "{name}: stack frame\n{}", b.log);
        assert_eq!(b.report.spills(), 0, "{name}: spills\n{}", b.log);
        // setmaxnreg must not be ignored (C7508) nor wgmma serialized.
        assert!(b.diagnostics.iter().all(|d| d.code != "P003" && d.code != "P004"), "{name}: {:#?}", b.diagnostics);
        // The written build directory.
        let dir = tempfile::tempdir().expect("temp dir");
        nvrtc::write_build_dir(&b, dir.path()).expect("writes");
        for f in ["kernel.cu", "kernel.cubin", "launch.json", "ptxas.json"] {
            assert!(dir.path().join(f).is_file(), "{name}: {f}");
        }
        let launch: cake::lower::LaunchSpec =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("launch.json")).unwrap()).expect("launch.json reads back");
        assert_eq!(launch, b.launch);
    }
}

#[test]
fn needs_toolchain_gemm_uses_its_register_budgets_without_spills() {
    toolchain();
    let b = build("gemm_bf16_ws", "sm_90a").unwrap_or_else(|e| panic!("{e}"));
    // 384 threads with __launch_bounds__(384, 1): 168 registers per thread at launch, which the
    // producer gives back (40) and the consumers take (232).
    assert_eq!(b.report.registers, Some(168));
    assert_eq!(b.report.spills(), 0);
    assert!(b.cuda.contains("setmaxnreg.dec.sync.aligned.u32 40;"));
    assert!(b.cuda.contains("setmaxnreg.inc.sync.aligned.u32 232;"));
}

/// The verifier rejects `broken/tx_mismatch` (V101), but bypassed it must still build: the harness
/// needs the cubin to record the hang on the GPU.
#[test]
fn needs_toolchain_tx_mismatch_builds_unverified() {
    toolchain();
    let b = build("broken/tx_mismatch", "sm_90a").unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", summary("tx_mismatch", "sm_90a", &b));
    assert_eq!(b.report.spills(), 0);
    assert!(b.cuda.contains("cake_mbar_arrive_expect_tx(full_bar, 65536u)"));
}

/// The sm_80 program on every target that has its ops (mma.sync, ldmatrix, cp.async).
#[test]
fn needs_toolchain_sm80_example_compiles_for_every_target_with_its_ops() {
    toolchain();
    for t in ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120a"] {
        let b = build("gemm_bf16_sm80", t).unwrap_or_else(|e| panic!("{t}: {e}"));
        eprintln!("{}", summary("gemm_bf16_sm80", t, &b));
        assert_eq!(b.report.arch, t);
        assert_eq!(b.report.spills(), 0, "{t}");
    }
}

/// Programs using wgmma exist only on sm_90a: another target is refused before NVRTC runs.
#[test]
fn sm90_examples_are_refused_elsewhere() {
    for name in ["gemm_bf16_ws", "kmeans_assign"] {
        for t in ["sm_80", "sm_100a", "sm_120a"] {
            match build(name, t) {
                Err(e @ BuildError::Target { .. }) => assert_eq!(e.code(), "N004"),
                Err(e) => panic!("{name} on {t}: expected N004, got {e}"),
                Ok(_) => panic!("{name} on {t}: must be refused"),
            }
        }
    }
}

#[test]
fn needs_toolchain_line_directives_compile() {
    toolchain();
    let src = source("kmeans_assign");
    let mut opts = LowerOptions::with_source("kmeans_assign.cake", &src);
    opts.line_directives = true;
    let b = nvrtc::build_with(&validated(&src), target("sm_90a"), &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.report.spills(), 0);
}

#[test]
fn needs_toolchain_nvrtc_errors_map_back_to_the_program() {
    toolchain();
    // Hand NVRTC broken code directly: a coded compile error with the log.
    match nvrtc::compile("extern \"C\" __global__ void k() { int x = ; }", "kernel.cu", "sm_90a") {
        Err(e @ BuildError::Compile { .. }) => {
            assert_eq!(e.code(), "N002");
            assert!(e.to_string().contains("kernel.cu"), "{e}");
        }
        Err(e) => panic!("expected N002, got {e}"),
        Ok(_) => panic!("must not compile"),
    }
}

/// A program exercising the lowering's elementwise math, reductions, shared broadcasts, casts
/// and stores (f32 rows, i32 rows, bf16 and f32 accumulators), through NVRTC.
const OPS_PROGRAM: &str = r#"kernel ops target sm_90a

dim M multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in V: f32[K] tma [64]
out S: f32[M]
out I: i32[M]
out P: bf16[M, 64]
out Q: f32[M, 64]

grid tiles[m = M / 128] persistent

smem a_s: bf16[128, 64] stages 2 swizzle 128B align 1024
smem v_s: f32[64] stages 2

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(v_s[ab.stage], V[kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 64] per warpgroup
    reg s: f32[64] per warpgroup
    reg mx: f32[64] per warpgroup
    reg im: i32[64] per warpgroup
    for t in tiles {
        fill(s, 0.0)
        fill(mx, -1e30)
        fill(im, 0)
        for kb in 0..K / 64 {
            wait(ab)
            zero(acc)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], a_s[ab.stage, 64 :+ 64])
            wgmma_commit()
            wgmma_wait(0)
            let w = acc * v_s[ab.stage]
            release(ab)
            let e = exp(w * 0.5) + abs(w) - sqrt(abs(w)) + rsqrt(abs(w) + 1.0) + log(abs(w) + 1.0) + exp2(w * 0.25)
            let r = reduce_sum(e, axis=1)
            s = s + r
            let m2 = reduce_max(acc, axis=1)
            let j = reduce_argmax(acc, axis=1) + kb * 64
            im = select(m2 > mx, j, im)
            mx = max(mx, m2)
        }
        store(S[t.m * 128 + mma.warpgroup * 64 :+ 64], s - min(mx, s))
        store(I[t.m * 128 + mma.warpgroup * 64 :+ 64], im)
        store(P[t.m * 128 + mma.warpgroup * 64 :+ 64, 0 :+ 64], cast(fma(acc, acc, acc), bf16))
        store(Q[t.m * 128 + mma.warpgroup * 64 :+ 64, 0 :+ 64], cast(cast(acc, bf16), f32) - acc)
    }
}
"#;

#[test]
fn ops_program_lowers() {
    let v = validated(OPS_PROGRAM);
    let l = cake::lower::lower_with(&v, &LowerOptions::with_source("ops.cake", OPS_PROGRAM)).unwrap_or_else(|e| panic!("{e}"));
    for needle in ["fmaxf(cake_x[2 * cake_j], cake_x[2 * cake_j + 1])", "min(cake_vi, cake_y)", "__shfl_xor_sync", "__expf(", "exp2f(", "__logf(", "rsqrtf(", "fmaf(", "make_float2(", "cake_round_bf16("] {
        assert!(l.cuda.contains(needle), "missing `{needle}`");
    }
}

#[test]
fn needs_toolchain_ops_program_compiles() {
    toolchain();
    let v = validated(OPS_PROGRAM);
    let b = nvrtc::build_with(&v, target("sm_90a"), &LowerOptions::with_source("ops.cake", OPS_PROGRAM))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", summary("ops", "sm_90a", &b));
    assert_eq!(b.report.stack_frame_bytes, 0, "{}", b.log);
    assert_eq!(b.report.spills(), 0, "{}", b.log);
}

// ---------------------------------------------------------------------------------------------
// The ptxas report parser (no toolchain needed).

const SAMPLE_LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_bf16_ws' for 'sm_90a'
ptxas info    : Function properties for gemm_bf16_ws
ptxas         .     16 bytes stack frame, 24 bytes spill stores, 32 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 400 bytes cmem[0]
ptxas warning : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry
ptxas info    : Compile time = 110.789 ms
";

#[test]
fn ptxas_report_parses() {
    let r = nvrtc::parse_ptxas_report(SAMPLE_LOG);
    assert_eq!(r.function, "gemm_bf16_ws");
    assert_eq!(r.arch, "sm_90a");
    assert_eq!(r.registers, Some(168));
    assert_eq!(r.barriers, Some(1));
    assert_eq!((r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes), (16, 24, 32));
    assert_eq!(r.cmem0_bytes, 400);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
}

#[test]
fn ptxas_facts_become_role_diagnostics() {
    let src = source("gemm_bf16_ws");
    let v = validated(&src);
    let r = nvrtc::parse_ptxas_report(SAMPLE_LOG);
    let d = nvrtc::report_diagnostics(v.module(), &r);
    let spill = d.iter().find(|d| d.code == "P001").expect("spill finding");
    assert!(spill.message.contains("in the `mma` role"), "{}", spill.message);
    let at = &src[spill.primary.span.start as usize..spill.primary.span.end as usize];
    assert!(at.starts_with("role mma"), "{at}");
    assert!(d.iter().any(|d| d.code == "P003"), "C7508 becomes P003: {d:#?}");
}

// ---------------------------------------------------------------------------------------------
// Constructs the corpus needs beyond bf16 GEMMs: every case of these families lowers (and, with
// the toolchain, builds without spills or stack: `needs_toolchain_families_build_...`), whatever
// tiers their manifests list today.

fn corpus() -> cake::corpus::Corpus {
    let root = format!("{}/../corpus", env!("CARGO_MANIFEST_DIR"));
    cake::corpus::Corpus::load(&root).unwrap_or_else(|e| panic!("{root}: {e}"))
}

/// The families whose constructs the tests below check.
const FAMILIES: [&str; 14] = [
    "tma-copy",
    "tma-transpose",
    "attention-fwd",
    "kmeans-update",
    "knn-topk",
    "softmax",
    "row-reduce",
    "rmsnorm",
    "layernorm",
    "elementwise",
    "gemm-sm90-ws",
    "gemm-sm80",
    "cross-entropy-bwd",
    "topk-select",
];

/// Every case of `family` lowers for its own target, and some case's CUDA contains each needle.
fn family_lowers(family: &str, needles: &[&str]) {
    assert!(FAMILIES.contains(&family), "{family}: add it to FAMILIES, so that it is built too");
    let c = corpus();
    let cases: Vec<_> = c.cases.iter().filter(|k| k.family == family).collect();
    assert!(!cases.is_empty(), "no cases in {family}");
    let mut seen = vec![false; needles.len()];
    for case in cases {
        let v = validated(&case.source);
        let t = target(&v.module().target.clone());
        let l = cake::lower::lower_for(&v, t, &LowerOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", case.id));
        for (i, n) in needles.iter().enumerate() {
            seen[i] |= l.cuda.contains(n);
        }
    }
    for (i, n) in needles.iter().enumerate() {
        assert!(seen[i], "{family}: no case lowers to `{n}`");
    }
}

/// Every case of every family in `FAMILIES` builds through NVRTC without spills or stack.
#[test]
fn needs_toolchain_families_build_without_spills_or_stack() {
    toolchain();
    let c = corpus();
    for family in FAMILIES {
        let cases: Vec<_> = c.cases.iter().filter(|k| k.family == family).collect();
        assert!(!cases.is_empty(), "no cases in {family}");
        for case in cases {
            let v = validated(&case.source);
            let t = target(&v.module().target.clone());
            let b = nvrtc::build_with(&v, t, &LowerOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", case.id));
            assert_eq!(b.report.spills(), 0, "{}", case.id);
            assert_eq!(b.report.stack_frame_bytes, 0, "{}: {}", case.id, b.log);
        }
    }
}

/// tma_store / tma_store_wait: bulk-group TMA stores from a pipeline ring.
#[test]
fn tma_copy_family_lowers() {
    family_lowers(
        "tma-copy",
        &["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "cake_tma_store_wait_read<0>();", "cake_tma_store_wait_all();"],
    );
}

/// Shared → shared stores without a register layout, then a TMA store of the tile.
#[test]
fn tma_transpose_family_lowers() {
    family_lowers("tma-transpose", &["split round-robin over the role's threads"]);
}

/// Fragment stores into swizzled shared memory, row-vector stores, [64, 1] shared broadcasts,
/// f16 wgmma.
#[test]
fn attention_family_lowers() {
    family_lowers(
        "attention-fwd",
        &["cake_swizzle<128>(", "if (cake_lane % 4 == 0) {", "cake_wgmma_m64n64k16_f32_f16("],
    );
}

/// A global vector broadcast along the columns of an accumulator.
#[test]
fn kmeans_update_family_lowers() {
    family_lowers("kmeans-update", &["*(const float*)(ICNT + "]);
}

/// `let` naming a global window, read in the row-vector layout.
#[test]
fn knn_topk_family_lowers() {
    family_lowers("knn-topk", &["names a read-only window", "*(const float*)(QN + "]);
}

/// Row reductions over per-warp windows (a butterfly across the warp) into per-warp running
/// state that every lane holds whole.
#[test]
fn row_families_lower() {
    let butterfly = "for (int cake_o = 16; cake_o > 0; cake_o /= 2) cake_v = ";
    family_lowers("softmax", &[butterfly, "float m[1];  // f32[1] per warp: the whole fragment in every thread of its scope"]);
    family_lowers("row-reduce", &[butterfly]);
    family_lowers("rmsnorm", &[butterfly]);
    family_lowers("layernorm", &[butterfly]);
}

/// Cross-entropy backward: a second pass over the row's chunks storing p − 1 at the target's
/// column by a select against a column-index window (the branches fragments: a select of two
/// literals is typed as a literal). Top-k: K rounds of a masked running maximum and the smallest
/// column holding it (an i32 min butterfly), the previous pick held per warp.
#[test]
fn cross_entropy_bwd_and_topk_families_lower() {
    family_lowers("cross-entropy-bwd", &["== tgt_e ? __expf(x_e - m[0]) / s[0] - 1.0f : __expf(x_e - m[0]) / s[0]"]);
    family_lowers(
        "topk-select",
        &[
            "for (int cake_o = 16; cake_o > 0; cake_o /= 2) cake_v = min(cake_v, __shfl_xor_sync(0xffffffffu, cake_v, cake_o));",
            "float pv[1];  // f32[1] per warp",
            "int pi[1];  // i32[1] per warp",
        ],
    );
}

/// Layout-free elementwise rows: `let` names of global windows, stores split over each warp's lanes.
#[test]
fn elementwise_family_lowers() {
    family_lowers("elementwise", &["split round-robin over the lanes of each warp"]);
}

/// wgmma beyond bf16: f16 (k16) with f32 and packed f16 accumulators, fp8 e4m3/e5m2 (k32, mixed).
#[test]
fn gemm_sm90_ws_family_lowers() {
    family_lowers(
        "gemm-sm90-ws",
        &[
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2",
            "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16",
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16",
            "packed two f16 per register",
        ],
    );
}

/// mma.sync with packed f16 accumulators.
#[test]
fn gemm_sm80_family_lowers() {
    family_lowers("gemm-sm80", &["cake_mma_m16n8k16_f16_f16(acc[cake_d / 2], acc[cake_d / 2 + 1],"]);
}

/// fp8 read in an expression: each byte widened to f32 through an f16 pair (`cvt.rn.f16x2.e4m3x2`,
/// sm_89+), where the lowering refused it with L001 before (2026-12-02).
fn fp8_dequant() -> (String, Validated) {
    let path = format!("{}/tests/fixtures/fp8_dequant_rows.cake", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let v = cake::check::check_source(&src).validated.unwrap_or_else(|| panic!("{path} does not verify"));
    (src, v)
}

#[test]
fn fp8_windows_are_read_widened_to_f32() {
    let (src, v) = fp8_dequant();
    let cuda = cake::lower::lower_with(&v, &LowerOptions::with_source("fp8_dequant_rows.cake", &src)).unwrap_or_else(|e| panic!("{e}")).cuda;
    assert!(cuda.contains("cvt.rn.f16x2.e4m3x2") && cuda.contains("cake_e4m3_get(*(const unsigned char*)(Q + "), "{cuda}");
    // The f16 helper it widens through is defined before it.
    assert!(cuda.find("float cake_f16x2_get(").unwrap() < cuda.find("float cake_e4m3_get(").unwrap());
}

#[test]
fn needs_toolchain_fp8_windows_read_in_expressions_compile() {
    toolchain();
    let (src, v) = fp8_dequant();
    let b = nvrtc::build_with(&v, target("sm_90a"), &LowerOptions::with_source("fp8_dequant_rows.cake", &src)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.report.spill_store_bytes, 0, "{:?}", b.report);
}
