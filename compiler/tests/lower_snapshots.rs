//! Snapshot tests of the lowering: the CUDA and the launch contract of each example program.
//! Review changes with `cargo insta review` (or `INSTA_UPDATE=always cargo test` to accept).

use cake::lower::{self, LowerOptions, Lowered};
use cake::verify::Validated;

fn source(name: &str) -> String {
    let path = format!("{}/../examples/{name}.cake", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn validated(src: &str) -> Validated {
    let out = cake::check::check_source(src);
    let module = out.module.unwrap_or_else(|| panic!("does not type-check: {:#?}", out.diagnostics));
    let target = cake::target::TargetTable::builtin().get(&module.target).expect("known target").clone();
    match cake::verify::verify(module.clone(), &target).validated {
        Some(v) => v,
        // The lowering must not depend on the verifier's verdict for these tests.
        None => Validated::assume_verified_unsafe(module),
    }
}

fn lowered(name: &str) -> Lowered {
    let src = source(name);
    let file = format!("{}.cake", name.rsplit('/').next().unwrap_or(name));
    lower::lower_with(&validated(&src), &LowerOptions::with_source(&file, &src)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn launch_json(l: &Lowered) -> String {
    serde_json::to_string_pretty(&l.launch).expect("serializable")
}

#[test]
fn gemm_bf16_ws_cuda() {
    insta::assert_snapshot!("gemm_bf16_ws_cuda", lowered("gemm_bf16_ws").cuda);
}

#[test]
fn gemm_bf16_ws_launch() {
    insta::assert_snapshot!("gemm_bf16_ws_launch", launch_json(&lowered("gemm_bf16_ws")));
}

#[test]
fn kmeans_assign_cuda() {
    insta::assert_snapshot!("kmeans_assign_cuda", lowered("kmeans_assign").cuda);
}

#[test]
fn kmeans_assign_launch() {
    insta::assert_snapshot!("kmeans_assign_launch", launch_json(&lowered("kmeans_assign")));
}

#[test]
fn gemm_bf16_sm80_cuda() {
    insta::assert_snapshot!("gemm_bf16_sm80_cuda", lowered("gemm_bf16_sm80").cuda);
}

#[test]
fn gemm_bf16_sm80_launch() {
    insta::assert_snapshot!("gemm_bf16_sm80_launch", launch_json(&lowered("gemm_bf16_sm80")));
}

/// The explicit-barrier program that announces more transaction bytes than its TMA loads deliver
/// (the verifier rejects it with V101; lowered anyway, it hangs on the GPU by design).
#[test]
fn tx_mismatch_cuda() {
    let src = source("broken/tx_mismatch");
    let out = cake::check::check_source(&src);
    let module = out.module.expect("type-checks");
    let target = cake::target::TargetTable::builtin().get(&module.target).expect("known target").clone();
    let report = cake::verify::verify(module, &target);
    assert!(report.validated.is_none(), "the verifier must reject it");
    assert!(report.findings.iter().any(|d| d.code == "V101"), "{:#?}", report.findings);
    let l = lowered("broken/tx_mismatch");
    // The bytes as written, not the bytes the loads deliver.
    assert!(l.cuda.contains("cake_mbar_arrive_expect_tx(full_bar, 65536u)"));
    insta::assert_snapshot!("tx_mismatch_cuda", l.cuda);
}

#[test]
fn output_is_deterministic() {
    for name in ["gemm_bf16_ws", "kmeans_assign", "gemm_bf16_sm80", "broken/tx_mismatch"] {
        let (a, b) = (lowered(name), lowered(name));
        assert_eq!(a.cuda, b.cuda, "{name}");
        assert_eq!(a.span_map, b.span_map, "{name}");
        assert_eq!(launch_json(&a), launch_json(&b), "{name}");
    }
}

/// Every statement of every role body has generated code mapped back to it, and every marker
/// comment names the right `.cake` line.
#[test]
fn span_map_covers_every_statement() {
    for name in ["gemm_bf16_ws", "kmeans_assign", "gemm_bf16_sm80", "broken/tx_mismatch"] {
        let src = source(name);
        let v = validated(&src);
        let l = lowered(name);
        let m = v.module();
        for (h, _) in m.stmts.iter() {
            let span = *m.stmts.span(h);
            assert!(l.span_map.iter().any(|(_, s)| *s == span), "{name}: statement at {span:?} has no CUDA lines");
        }
        let lines: Vec<&str> = l.cuda.lines().collect();
        for (line, span) in &l.span_map {
            let text = lines[*line as usize - 1];
            if let Some(rest) = text.trim_start().strip_prefix("// cake: line ") {
                let n: usize = rest.split(':').next().unwrap().parse().unwrap();
                let (expect, _) = cake::span::line_col(&src, span.start as usize);
                assert_eq!(n, expect, "{name}: marker `{text}`");
            }
        }
    }
}

#[test]
fn markers_without_source_use_byte_spans() {
    let src = source("gemm_bf16_ws");
    let l = lower::lower(&validated(&src)).expect("lowers");
    assert!(l.cuda.contains("// cake: bytes "));
    assert!(!l.cuda.contains("// cake: line "));
}

#[test]
fn line_directives_point_at_the_program() {
    let src = source("kmeans_assign");
    let mut opts = LowerOptions::with_source("kmeans_assign.cake", &src);
    opts.line_directives = true;
    let l = lower::lower_with(&validated(&src), &opts).expect("lowers");
    assert!(l.cuda.contains("#line 40 \"kmeans_assign.cake\""), "acquire(cs) is on line 40");
    // Lines after a run of program code return to the CUDA file's own numbering.
    let lines: Vec<&str> = l.cuda.lines().collect();
    for (i, text) in lines.iter().enumerate() {
        if let Some(rest) = text.strip_prefix("#line ") {
            if rest.ends_with("\"kernel.cu\"") {
                let n: usize = rest.split(' ').next().unwrap().parse().unwrap();
                assert_eq!(n, i + 2, "`{text}` on line {} must name the next line", i + 1);
            }
        }
    }
}

/// The launch contract of the warp-specialized GEMM, field by field.
#[test]
fn gemm_launch_contract() {
    let l = lowered("gemm_bf16_ws");
    let s = &l.launch;
    assert_eq!(s.entry, "gemm_bf16_ws");
    assert_eq!(s.block_threads, 384);
    assert!(s.grid.persistent);
    assert_eq!(s.grid.tiles_text, "M / 128 * (N / 256)");
    let dims: std::collections::BTreeMap<String, i64> =
        [("M".to_string(), 8192), ("N".to_string(), 8192), ("K".to_string(), 8192)].into_iter().collect();
    assert_eq!(s.grid.tiles.eval(&dims), Ok(64 * 32));
    assert_eq!(s.grid.blocks(&dims, 132), Ok(132));
    // 4 stages × (16 KiB + 32 KiB) + 8 mbarriers + 1024 bytes of base-alignment slack.
    assert_eq!(s.dynamic_smem_bytes, 4 * (16384 + 32768) + 64 + 1024);
    let kinds: Vec<String> = s
        .params
        .iter()
        .map(|p| match p {
            lower::ParamSpec::TensorPtr { name, .. } => format!("ptr {name}"),
            lower::ParamSpec::TensorMap { name, .. } => format!("map {name}"),
            lower::ParamSpec::Dim { name, .. } => format!("dim {name}"),
            lower::ParamSpec::Scalar { name, .. } => format!("scalar {name}"),
        })
        .collect();
    assert_eq!(kinds, ["ptr A", "map A_tmap", "ptr B", "map B_tmap", "ptr C", "dim M", "dim N", "dim K"]);
    let a = &s.tensor_maps[0];
    assert_eq!((a.rank, a.data_type, a.swizzle), (2, 9, 3));
    assert_eq!(a.box_dims, [64, 128]);
    assert_eq!(a.global_dims_text, ["K", "M"]);
    assert_eq!(a.global_strides_text, ["2 * K"]);
    assert_eq!(s.tensor_maps[1].box_dims, [64, 256]);
}

#[test]
fn kmeans_tensor_maps_are_innermost_first() {
    let l = lowered("kmeans_assign");
    let x = &l.launch.tensor_maps[0];
    assert_eq!(x.global_dims_text, ["D", "N", "B"]);
    assert_eq!(x.global_strides_text, ["2 * D", "2 * D * N"]);
    assert_eq!(x.box_dims, [64, 128, 1]);
    let cn = &l.launch.tensor_maps[2];
    assert_eq!((cn.tensor.as_str(), cn.data_type, cn.swizzle, cn.box_bytes), ("CN", 7, 0, 512));
    assert_eq!(cn.box_dims, [128, 1]);
}

// ---------------------------------------------------------------------------------------------
// Refusals: coded errors with the span of the construct, never wrong code.

fn lower_src(src: &str) -> Result<Lowered, lower::LowerError> {
    lower::lower_with(&validated(src), &LowerOptions::with_source("t.cake", src))
}

const PRODUCER_CONSUMER: &str = "kernel t target sm_90a
dim M multiple_of 128
dim K multiple_of 64
in A: bf16[M, K] tma [128, 64] swizzle 128B
out C: f32[M, 64]
grid tiles[m = M / 128] persistent
smem a_s: bf16[128, 64] stages 2 swizzle 128B
role load: warpgroup 0
role mma: warpgroup 1
pipeline ab: stages 2 producer load consumer mma
on load {
    for t in tiles {
        LOAD
    }
}
on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, 0 :+ 64], a_s[ab.stage, 64 :+ 64])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 128 :+ 64, 0 :+ 64], acc)
    }
}
";

fn with_load(load: &str) -> String {
    PRODUCER_CONSUMER.replace("LOAD", load)
}

#[test]
fn small_producer_consumer_lowers() {
    let src = with_load("for kb in 0..K / 64 {\n acquire(ab)\n tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)\n }");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("cake_mbar_arrive_expect_tx(ab_full + 8 * ab_stage, 16384u)"));
    assert!(l.cuda.contains("cake_wgmma_m64n64k16_f32_bf16"));
    // An f32 accumulator stored to an f32 tensor: 8-byte pair stores.
    assert!(l.cuda.contains("*(float2*)"));
}

#[test]
fn tx_bytes_in_a_runtime_loop_are_refused() {
    // The acquire covers loads in a loop whose trip count is only known at run time.
    let src = with_load("acquire(ab)\n for kb in 0..K / 64 {\n tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)\n }");
    let e = lower_src(&src).expect_err("must refuse");
    assert_eq!(e.code, "L004", "{e}");
}

#[test]
fn tma_window_must_match_the_box() {
    let src = with_load("for kb in 0..K / 64 {\n acquire(ab)\n tma_load(a_s[ab.stage, 0 :+ 64], A[t.m * 128 :+ 64, kb * 64 :+ 64], ab)\n }");
    let out = cake::check::check_source(&src);
    if out.module.is_none() {
        // The checker already refuses it; nothing left for the lowering to decide.
        return;
    }
    let e = lower_src(&src).expect_err("must refuse");
    assert_eq!(e.code, "L005", "{e}");
}

#[test]
fn explicit_barriers_lower_to_mbarriers() {
    let src = "kernel t target sm_90a
dim M multiple_of 128
out C: f32[M]
role a: warp 0
role b: warp 1
barrier done: count 1 producer a consumer b
on a {
    arrive(done)
}
on b {
    wait(done)
}
";
    let out = cake::check::check_source(src);
    let Some(_) = out.module else {
        panic!("test program must type-check: {:#?}", out.diagnostics);
    };
    let l = lower_src(src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("cake_mbar_init(done_bar, 1);"), "{}", l.cuda);
    assert!(l.cuda.contains("cake_mbar_arrive(done_bar);"), "{}", l.cuda);
    assert!(l.cuda.contains("cake_mbar_wait(done_bar, done_phase);"), "{}", l.cuda);
    assert!(l.cuda.contains("done_phase ^= 1u;"), "{}", l.cuda);
}

/// A staged barrier: `B[i]` selects one mbarrier, `wait` keeps one parity bit per stage, and
/// `wait_parity` takes the parity as written.
#[test]
fn staged_barriers_index_and_track_parity_per_stage() {
    let src = "kernel t target sm_90a
dim M multiple_of 128
dim K multiple_of 64
in A: bf16[M, K] tma [128, 64] swizzle 128B
out C: f32[M, 64]
grid tiles[m = M / 128] persistent
smem a_s: bf16[128, 64] stages 2 swizzle 128B
role load: warpgroup 0
role mma: warpgroup 1
barrier full: stages 2 count 1 producer load consumer mma
barrier empty: stages 2 count 1 producer mma consumer load
on load {
    for t in tiles {
        for kb in 0..K / 64 {
            if kb >= 2 {
                wait_parity(empty[kb % 2], kb / 2 % 2 + 1)
            }
            arrive_expect_tx(full[kb % 2], 16384)
            tma_load(a_s[kb % 2], A[t.m * 128 :+ 128, kb * 64 :+ 64], full[kb % 2])
        }
    }
}
on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(full[kb % 2])
            wgmma(acc, a_s[kb % 2, 0 :+ 64], a_s[kb % 2, 64 :+ 64])
            wgmma_commit()
            wgmma_wait(0)
            arrive(empty[kb % 2])
        }
        store(C[t.m * 128 :+ 64, 0 :+ 64], acc)
    }
}
";
    let out = cake::check::check_source(src);
    let Some(_) = out.module else {
        panic!("test program must type-check: {:#?}", out.diagnostics);
    };
    let l = lower_src(src).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "for (int cake_s = 0; cake_s < 2; ++cake_s) cake_mbar_init(full_bar + 8 * cake_s, 1);",
        "cake_mbar_wait(full_bar + 8 * (kb % 2), (full_phase >> (kb % 2)) & 1u);",
        "full_phase ^= 1u << (kb % 2);",
        "cake_mbar_wait(empty_bar + 8 * (kb % 2), (unsigned)(kb / 2 % 2 + 1) & 1u);",
        "cake_mbar_arrive_expect_tx(full_bar + 8 * (kb % 2), 16384u);",
        "cake_tma_load_2d(smem_a_s + 16384 * (kb % 2), &A_tmap, full_bar + 8 * (kb % 2), kb * 64, t_m * 128);",
        "cake_named_barrier(2, 128);",
        "if (threadIdx.x == 128) cake_mbar_arrive(empty_bar + 8 * (kb % 2));",
    ] {
        assert!(l.cuda.contains(needle), "missing `{needle}` in\n{}", l.cuda);
    }
}

#[test]
fn a_staged_barrier_without_an_index_is_refused() {
    let src = "kernel t target sm_90a
dim M multiple_of 128
out C: f32[M]
role a: warp 0
role b: warp 1
barrier done: stages 2 count 1 producer a consumer b
on a {
    arrive(done)
}
on b {
    wait(done[0])
}
";
    let out = cake::check::check_source(src);
    let Some(_) = out.module else {
        panic!("test program must type-check: {:#?}", out.diagnostics);
    };
    let e = lower_src(src).expect_err("must refuse");
    assert_eq!(e.code, "L001", "{e}");
    assert_eq!(&src[e.span.start as usize..e.span.end as usize], "arrive(done)");
}

/// `group G` on a three-axis tile space: the leading axis still varies slowest, the last two are
/// walked in bands of G along the middle one.
#[test]
fn grouped_rasterization_keeps_leading_axes_slowest() {
    let src = with_load("for kb in 0..K / 64 {\n acquire(ab)\n tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)\n }")
        .replace("grid tiles[m = M / 128] persistent", "grid tiles[b = 2, m = M / 128, n = 4] persistent group 8");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        "const int t_b = t_index / (tiles_m * tiles_n);  // t.b",
        "const int t_plane = t_index % (tiles_m * tiles_n);",
        "const int t_band = t_plane / (8 * tiles_n) * 8;",
        "const int t_band_rows = tiles_m - t_band < 8 ? tiles_m - t_band : 8;",
        "const int t_in_band = t_plane - t_band * tiles_n;",
        "const int t_m = t_band + t_in_band % t_band_rows;  // t.m",
        "const int t_n = t_in_band / t_band_rows;  // t.n",
    ] {
        assert!(l.cuda.contains(needle), "missing `{needle}` in\n{}", l.cuda);
    }
    assert_eq!((l.launch.grid.rasterization.as_str(), l.launch.grid.group), ("grouped", Some(8)));
}

#[test]
fn group_needs_two_tile_axes() {
    let src = with_load("").replace("grid tiles[m = M / 128] persistent", "grid tiles[m = M / 128] persistent group 8");
    let out = cake::check::check_source(&src);
    assert!(out.module.is_none());
    assert!(out.diagnostics.iter().any(|d| d.code == "E0308" && d.message.contains("group")), "{:#?}", out.diagnostics);
}

/// A window of an accumulator (`acc[:, j * 32 :+ 32]`) is a sub-tile in the same layout: element
/// i of the window is a compile-time register of the whole fragment once `j` is unrolled.
#[test]
fn accumulator_windows_index_whole_tiles() {
    let src = PRODUCER_CONSUMER
        .replace("out C: f32[M, 64]", "out C: bf16[M, 64] tma [64, 32] swizzle 64B")
        .replace("smem a_s: bf16[128, 64] stages 2 swizzle 128B", "smem a_s: bf16[128, 64] stages 2 swizzle 128B\nsmem c_s: bf16[2, 64, 32] swizzle 64B")
        .replace(
            "        store(C[t.m * 128 :+ 64, 0 :+ 64], acc)",
            "        tma_store_wait(0)\n        for j in 0..2 {\n            store(c_s[j], cast(acc[:, j * 32 :+ 32], bf16))\n        }\n        fence_proxy_async()\n        sync_role(mma)\n        for j in 0..2 {\n            tma_store(C[t.m * 128 :+ 64, j * 32 :+ 32], c_s[j])\n        }",
        )
        .replace("LOAD", "for kb in 0..K / 64 {\n acquire(ab)\n tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)\n }");
    let out = cake::check::check_source(&src);
    let Some(_) = out.module else {
        panic!("test program must type-check: {:#?}", out.diagnostics);
    };
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        // 4 column tiles of the window inside the 8 of the fragment, offset by j * 32 / 8.
        "acc[((cake_i) / 4 / 4 * 8 + ((cake_i) / 4) % 4 + (j * 32) / 8) * 4 + (cake_i) % 4]",
        "cake_swizzle<64>(4096 * j + 64 * cake_row + 2 * cake_col)",
        "cake_tma_store_2d(&C_tmap, smem_c_s + 4096 * j, j * 32, t_m * 128);",
        "cake_tma_store_wait_all();",
    ] {
        assert!(l.cuda.contains(needle), "missing `{needle}` in\n{}", l.cuda);
    }
}

// ---------------------------------------------------------------------------------------------
// Shared-memory views: another name, type and swizzle for bytes of a region.

fn corpus_case(id: &str) -> String {
    let root = format!("{}/../corpus", env!("CARGO_MANIFEST_DIR"));
    let corpus = cake::corpus::Corpus::load(&root).unwrap_or_else(|e| panic!("{root}: {e}"));
    corpus.cases.into_iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no corpus case {id}")).source
}

#[test]
fn smem_view_cuda() {
    let src = corpus_case("smem-view/bf16-128x64-sw128");
    let l = lower::lower_with(&validated(&src), &LowerOptions::with_source("smem-view.cake", &src)).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("smem_view_cuda", l.cuda);
}

#[test]
fn views_get_their_own_address_and_layout_slot() {
    let src = corpus_case("smem-view/bf16-128x64-sw128");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("const unsigned smem_bottom = cake_smem_base + 8192u;"), "{}", l.cuda);
    assert!(l.cuda.contains("cake_tma_load_2d(smem_bottom, "), "{}", l.cuda);
    let slot = l.launch.smem_layout.iter().find(|s| s.name == "bottom").expect("a layout slot for the view");
    assert_eq!((slot.kind.as_str(), slot.offset, slot.bytes), ("view of tile", 8192, 8192));
}

const VIEW_OPERAND: &str = "kernel t target sm_90a
dim M multiple_of 128
dim K multiple_of 64
in A: bf16[M, K] tma [64, 64] swizzle 128B
out C: f32[M, 64]
grid tiles[m = M / 128] persistent
smem a_s: bf16[128, 64] REGION_ATTRS
view a_lo: bf16[64, 64] of a_s offset 0 swizzle 128B
view a_hi: bf16[64, 64] of a_s offset 8192 swizzle 128B
role load: warpgroup 0
role mma: warpgroup 1
pipeline ab: stages 1 producer load consumer mma
on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_lo, A[t.m * 128 :+ 64, kb * 64 :+ 64], ab)
            tma_load(a_hi, A[t.m * 128 + 64 :+ 64, kb * 64 :+ 64], ab)
        }
    }
}
on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_lo, a_hi)
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 128 :+ 64, 0 :+ 64], acc)
    }
}
";

#[test]
fn wgmma_reads_operands_through_views() {
    let l = lower_src(&VIEW_OPERAND.replace("REGION_ATTRS", "swizzle 128B")).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("cake_wgmma_desc(smem_a_lo, 16, 1024, 1)"), "{}", l.cuda);
    assert!(l.cuda.contains("cake_wgmma_desc(smem_a_hi, 16, 1024, 1)"), "{}", l.cuda);
}

#[test]
fn a_swizzled_view_aligns_its_unswizzled_region_to_the_atom() {
    // The region itself is unswizzled (default alignment 128), but its views read the 128B
    // pattern off the address bits: the region must start on a 1024-byte atom.
    let l = lower_src(&VIEW_OPERAND.replace("REGION_ATTRS", "")).unwrap_or_else(|e| panic!("{e}"));
    let region = l.launch.smem_layout.iter().find(|s| s.name == "a_s").expect("region slot");
    assert_eq!(region.align, 1024);
    assert!(l.cuda.contains("// a_s: bf16[128, 64], align 1024"), "{}", l.cuda);
}

#[test]
fn a_swizzled_view_over_an_explicitly_underaligned_region_is_refused() {
    // The lowering used to refuse this (L002); the verifier now does, over the shared layout.
    let src = VIEW_OPERAND.replace("REGION_ATTRS", "align 128");
    let out = cake::check::check_source(&src);
    let d = out.diagnostics.iter().find(|d| d.code == "V220").unwrap_or_else(|| panic!("V220 expected: {:?}", out.diagnostics));
    assert!(d.message.contains("view `a_lo` of `a_s` is swizzled with a 1024-B atom, but `a_s` is aligned to 128 B"), "{}", d.message);
    assert_eq!(&src[d.primary.span.start as usize..d.primary.span.end as usize], "align 128", "the error points at the alignment");
    assert!(out.validated.is_none());
}

#[test]
fn a_swizzled_view_starting_mid_atom_is_refused() {
    // The lowering used to refuse this (L002); the verifier's V302 does, at the offset.
    let src = VIEW_OPERAND.replace("REGION_ATTRS", "swizzle 128B").replace("of a_s offset 8192", "of a_s offset 8704");
    let out = cake::check::check_source(&src);
    let d = out.diagnostics.iter().find(|d| d.code == "V302").unwrap_or_else(|| panic!("V302 expected: {:?}", out.diagnostics));
    assert!(d.message.contains("starts at byte 8704 of `a_s`, not a multiple of 1024"), "{}", d.message);
    assert_eq!(&src[d.primary.span.start as usize..d.primary.span.end as usize], "offset 8704", "the error points at the offset");
    assert!(out.validated.is_none());
}

#[test]
fn a_tma_destination_view_off_the_128_byte_grid_is_refused() {
    // An unswizzled view 64 bytes into its region: the address is only 64-byte aligned, and a TMA
    // destination needs 128.
    let src = "kernel t target sm_90a
dim R multiple_of 64
in A: f32[R, 32] tma [64, 32]
out B: f32[R, 32] tma [64, 32]
grid tiles[r = R / 64] persistent
smem buf: f32[65, 32]
view shifted: f32[64, 32] of buf offset 64
role load: warp 0
role store: warp 1
pipeline ab: stages 1 producer load consumer store
on load {
    for t in tiles {
        acquire(ab)
        tma_load(shifted, A[t.r * 64 :+ 64, 0 :+ 32], ab)
    }
}
on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 64 :+ 64, 0 :+ 32], shifted)
        tma_store_wait(0)
        release(ab)
    }
}
";
    let e = lower_src(src).expect_err("must refuse");
    assert_eq!(e.code, "L006", "{e}");
}

// ---------------------------------------------------------------------------------------------
// Row windows: reductions split over a warp's lanes, per-warp state every lane holds whole.

#[test]
fn softmax_cuda() {
    let src = corpus_case("softmax/sm_90a-bf16-c1024-w8x4");
    let l = lower::lower_with(&validated(&src), &LowerOptions::with_source("softmax.cake", &src)).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("softmax_cuda", l.cuda);
}

const ROW_SUM: &str = "kernel t target sm_90a
dim R multiple_of 8
const C = 256
in X: f32[R, C]
out Out: f32[R]
grid tiles[r = R / 8]
role rows: warp 0..8
on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        WINDOW
        VALUE
        store(Out[t.r * 8 + rows.warp :+ 1], acc)
    }
}
";

fn row_sum(window: &str, value: &str) -> String {
    ROW_SUM.replace("WINDOW", window).replace("VALUE", value)
}

#[test]
fn a_row_reduction_is_split_over_the_warp_and_every_lane_gets_the_result() {
    let src = row_sum("let x = X[t.r * 8 + rows.warp, :]", "acc = reduce_sum(x * x, axis=0)");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    // f32 rows of 256, 4-aligned: each lane takes 4 consecutive elements per step, one 16-byte load.
    assert!(l.cuda.contains("for (int cake_e0 = cake_t * 4; cake_e0 < 256; cake_e0 += 128) {"), "{}", l.cuda);
    // Both steps unrolled (up to 4 are, so several loads are in flight).
    let before_loop = l.cuda.split("for (int cake_e0").next().unwrap_or_default();
    assert_eq!(before_loop.lines().last().map(str::trim), Some(""), "{}", l.cuda);
    assert!(before_loop.trim_end().ends_with("#pragma unroll 2"), "{}", l.cuda);
    assert!(l.cuda.contains("const uint4 cake_v0 = *(const uint4*)(X + (long long)(t_r * 8 + rows_warp) * X_stride0 + cake_e0);"), "{}", l.cuda);
    assert!(l.cuda.contains("const float x_e = ((const float*)&cake_v0)[cake_j];"), "{}", l.cuda);
    assert!(l.cuda.contains("cake_v = cake_v + x_e * x_e;"), "{}", l.cuda);
    assert!(l.cuda.contains("for (int cake_o = 16; cake_o > 0; cake_o /= 2) cake_v = cake_v + __shfl_xor_sync(0xffffffffu, cake_v, cake_o);"), "{}", l.cuda);
    // The one-element store of the per-warp result: one lane of the warp writes it.
    assert!(l.cuda.contains("for (int cake_e = cake_t; cake_e < 1; cake_e += 32) {"), "{}", l.cuda);
}

#[test]
fn a_row_window_off_the_vector_grid_is_read_one_element_at_a_time() {
    // Rows start at `rows.warp` columns: no provable 16-byte alignment, so no vector loads.
    let src = ROW_SUM.replace("const C = 256", "const C = 260").replace("VALUE", "acc = reduce_sum(x, axis=0)");
    let src = src.replace("WINDOW", "let x = X[t.r * 8 + rows.warp, rows.warp :+ 256]");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("for (int cake_e = cake_t; cake_e < 256; cake_e += 32) {"), "{}", l.cuda);
    assert!(!l.cuda.contains("uint4"), "{}", l.cuda);
}

#[test]
fn a_row_max_starts_from_minus_infinity() {
    let src = row_sum("let x = X[t.r * 8 + rows.warp, :]", "acc = reduce_max(x, axis=0)");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("float cake_v = __int_as_float(0xff800000);"), "{}", l.cuda);
    assert!(l.cuda.contains("cake_v = fmaxf(cake_v, x_e);"), "{}", l.cuda);
}

#[test]
fn a_reduction_over_a_window_the_whole_role_shares_is_refused() {
    // Without `rows.warp` every warp of the role reads the same row: no per-warp split exists.
    let src = row_sum("let x = X[t.r * 8, :]", "acc = reduce_sum(x, axis=0)");
    let e = lower_src(&src).expect_err("must refuse");
    assert_eq!(e.code, "L001", "{e}");
    assert!(e.message.contains("a reduction over a window several warps read together"), "{e}");
}

#[test]
fn an_arg_reduction_over_a_window_carries_the_index_through_the_butterfly() {
    // `cake check` accepts it, so the lowering must too (it was L001): see lower_reductions.rs.
    let src = ROW_SUM.replace("reg acc: f32[1] per warp", "reg acc: i32[1] per warp").replace("out Out: f32[R]", "out Out: i32[R]");
    let src = src.replace("WINDOW", "let x = X[t.r * 8 + rows.warp, :]").replace("VALUE", "acc = reduce_argmax(x, axis=0)");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("const int cake_l = __shfl_xor_sync(0xffffffffu, cake_k, cake_o);"), "{}", l.cuda);
}

#[test]
fn a_let_name_for_a_value_with_a_reduction_inside_is_refused() {
    // A name of a layout-free value is re-read at every use: the reduction would run per element.
    let src = row_sum("let x = X[t.r * 8 + rows.warp, :]\n        let d = x - reduce_max(x, axis=0)", "acc = reduce_sum(d, axis=0)");
    let e = lower_src(&src).expect_err("must refuse");
    assert_eq!(e.code, "L007", "{e}");
}

#[test]
fn a_vector_that_could_straddle_the_end_of_the_tensor_is_not_used() {
    // Windows of 256 from a 256-multiple start, but the tensor's length C is only known to be
    // even: the last vector of a window could run past its end.
    let src = ROW_SUM.replace("const C = 256", "dim C multiple_of 2\nin V: f32[C]").replace("VALUE", "acc = reduce_sum(x, axis=0)");
    let src = src.replace("WINDOW", "let x = V[rows.warp * 256 :+ 256]");
    let l = lower_src(&src).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("for (int cake_e = cake_t; cake_e < 256; cake_e += 32) {"), "{}", l.cuda);
    assert!(!l.cuda.contains("uint4"), "{}", l.cuda);
    // The same with C a multiple of 4: one 16-byte load per step.
    let l = lower_src(&src.replace("dim C multiple_of 2", "dim C multiple_of 4")).unwrap_or_else(|e| panic!("{e}"));
    assert!(l.cuda.contains("uint4 cake_v0"), "{}", l.cuda);
}
