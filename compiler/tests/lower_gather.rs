//! Data-dependent row indices (issue 19 item 1): a gather `E[id, ...]` and a scatter
//! `store(Out[id, ...], v)` with `let id = Ids[r :+ 1]`. The type rule (E0325), the verifier's
//! treatment (a scatter's coverage is a coverage limit, never a claimed pass), the lowered CUDA
//! (the index loaded once, a 64-bit row offset, every access guarded; insta snapshot) and NVRTC
//! builds on sm_90a and sm_80 (`. .toolchain/cuda/env.sh` first).

use cake::diag::Severity;
use cake::target::TargetTable;

#[path = "support/lowering.rs"]
mod lowering;
use lowering::{build, lowered};

const GATHER: &str = r#"kernel emb_gather target sm_90a

dim R multiple_of 8
const V = 32000
const H = 4096

in Ids: i32[R]
in E: bf16[V, H]
out Out: bf16[R, H]

grid tiles[r = R / 8]

role rows: warp 0..4

on rows {
    for t in tiles {
        for i in 0..2 {
            let id = Ids[t.r * 8 + rows.warp * 2 + i :+ 1]
            for c in 0..H / 1024 {
                store(Out[t.r * 8 + rows.warp * 2 + i, c * 1024 :+ 1024], E[id, c * 1024 :+ 1024])
            }
        }
    }
}
"#;

const SCATTER: &str = r#"kernel emb_scatter target sm_80

dim R multiple_of 8
dim V multiple_of 8
const H = 2048

in Ids: u32[R]
in X: f32[R, H]
inout Out: f32[V, H]

grid tiles[r = R / 8] persistent

role rows: warp 0..8

on rows {
    for t in tiles {
        let id = Ids[t.r * 8 + rows.warp]
        for c in 0..H / 512 {
            store(Out[id, c * 512 :+ 512], X[t.r * 8 + rows.warp, c * 512 :+ 512] * 2.0)
        }
    }
}
"#;

fn diagnostics(src: &str) -> Vec<cake::diag::Diagnostic> {
    let out = cake::check::check_source(src);
    let Some(module) = out.module else { return out.diagnostics };
    let target = TargetTable::builtin().get(&module.target).expect("known target").clone();
    cake::verify::verify(module, &target).findings
}


#[test]
fn gather_loads_the_index_once_and_guards_the_row() {
    let cuda = lowered(GATHER, "gather.cake").cuda;
    assert!(cuda.contains("const int id = "), "{cuda}");
    assert!(cuda.contains("a data-dependent index, loaded once"), "{cuda}");
    // The row offset in 64 bits, the access guarded (a row outside reads as 0).
    assert!(cuda.contains("E + (long long)(id) * E_stride0"), "{cuda}");
    assert!(cuda.contains("0 <= id && id < 32000"), "{cuda}");
    insta::assert_snapshot!("embedding_gather_cuda", cuda);
}

#[test]
fn gather_is_verified_without_coverage_limits() {
    // The output rows are tile-derived: full coverage is proved; the gathered rows are reads.
    let ds = diagnostics(GATHER);
    assert!(ds.iter().all(|d| d.severity != Severity::CoverageLimit && !d.is_error()), "{ds:#?}");
}

#[test]
fn scatter_skips_rows_outside_and_reports_a_coverage_limit() {
    let cuda = lowered(SCATTER, "scatter.cake").cuda;
    // `Ids[r]` (one element) lowers to a guarded scalar load (it was L001 before).
    assert!(cuda.contains("const unsigned id = "), "{cuda}");
    assert!(cuda.contains("if (0 <= id && id < V) {  // a data-dependent row: written only inside the tensor"), "{cuda}");
    // The verifier cannot place the scattered rows: V321 is a coverage limit, not a pass.
    let ds = diagnostics(SCATTER);
    assert!(ds.iter().any(|d| d.severity == Severity::CoverageLimit && d.message.contains("V321")), "{ds:#?}");
    assert!(ds.iter().all(|d| !d.is_error()), "{ds:#?}");
}

#[test]
fn a_scatter_into_an_out_tensor_is_not_claimed_covered() {
    let src = SCATTER.replace("inout Out", "out Out");
    let ds = diagnostics(&src);
    assert!(ds.iter().any(|d| d.severity == Severity::CoverageLimit && d.message.contains("V320")), "{ds:#?}");
}

#[test]
fn data_indices_outside_the_rule_are_e0325() {
    let cases = [
        // arithmetic on the index
        GATHER.replace("E[id, c", "E[id + 1, c"),
        // a window start
        GATHER.replace("E[id, c * 1024 :+ 1024]", "E[id :+ 1, c * 1024 :+ 1024]"),
        // a lane-dependent index
        GATHER.replace("rows.warp * 2 + i :+ 1]", "rows.lane :+ 1]"),
        // read inline, not through a `let`
        GATHER.replace("E[id, c", "E[Ids[t.r * 8 + rows.warp * 2 + i], c"),
        // an inout index tensor
        GATHER.replace("in Ids", "inout Ids"),
    ];
    for src in cases {
        let ds = diagnostics(&src);
        assert!(ds.iter().any(|d| d.code == "E0325"), "{src}\n{ds:#?}");
    }
}

#[test]
fn needs_toolchain_gather_and_scatter_compile() {
    for (src, file, arch) in [(GATHER, "gather.cake", "sm_90a"), (SCATTER, "scatter.cake", "sm_80")] {
        let b = build(src, file);
        assert_eq!(&b.cubin[..4], b"\x7fELF", "{file}");
        assert_eq!(b.report.arch, arch);
        assert_eq!(b.report.spills(), 0, "{file}: spills\n{}", b.log);
    }
}
