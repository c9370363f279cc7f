//! `atomic_add` / `atomic_min` / `atomic_max`: the lowered CUDA (insta snapshots) and NVRTC builds
//! on sm_80 (f32 / f16 / i32 adds, i32 and f32 min/max, a scalar broadcast) and sm_90a (bf16 adds,
//! the op-coverage column-statistics program). Builds need the toolchain (`. .toolchain/cuda/env.sh`).

#[path = "support/lowering.rs"]
mod lowering;
use lowering::{build, lowered};

/// Every atomic form that exists on sm_80.
const SM80: &str = r#"kernel atomic_sm80 target sm_80

dim R multiple_of 8
const C = 256

in X: f32[R, C]
in H: f16[R, C]
in K: i32[R, C]
inout S: f32[C]
inout HS: f16[C]
inout KMIN: i32[C]
inout KMAX: i32[C]
inout FMAX: f32[C]
inout CNT: i32[R / 8]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    for t in tiles {
        atomic_add(S[:], X[t.r * 8 + rows.warp, :] * 2.0)
        atomic_add(HS[:], H[t.r * 8 + rows.warp, :])
        atomic_min(KMIN[:], K[t.r * 8 + rows.warp, :])
        atomic_max(KMAX[:], K[t.r * 8 + rows.warp, :])
        atomic_max(FMAX[:], X[t.r * 8 + rows.warp, :])
        atomic_add(CNT[t.r :+ 1], 1)
    }
}
"#;

/// bf16 adds (sm_90+): a raw bf16 row and a converted f32 expression.
const BF16: &str = r#"kernel atomic_bf16 target sm_90a

dim R multiple_of 4
const C = 512

in G: bf16[R, C]
inout DB: bf16[C]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    for t in tiles {
        atomic_add(DB[:], G[t.r * 4 + rows.warp, :])
        atomic_add(DB[:], cast(cast(G[t.r * 4 + rows.warp, :], f32) * 0.5, bf16))
    }
}
"#;

fn column_stats() -> String {
    let path = format!("{}/../corpus/op-coverage/atomic-column-stats.cake", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}


#[test]
fn atomic_column_stats_cuda() {
    insta::assert_snapshot!("atomic_column_stats_cuda", lowered(&column_stats(), "atomic-column-stats.cake").cuda);
}

#[test]
fn atomic_sm80_cuda() {
    let cuda = lowered(SM80, "atomic_sm80.cake").cuda;
    // One reduction per element, never a plain store into the accumulated tensors.
    assert!(cuda.contains("atomicAdd((float*)(S + "), "{cuda}");
    assert!(cuda.contains("red.add.noftz.f16"), "{cuda}");
    assert!(cuda.contains("atomicMin((int*)(KMIN + "), "{cuda}");
    assert!(cuda.contains("atomicMax((int*)(KMAX + "), "{cuda}");
    assert!(cuda.contains("signbit"), "f32 max as a sign-split integer reduction: {cuda}");
    insta::assert_snapshot!("atomic_sm80_cuda", cuda);
}

#[test]
fn needs_toolchain_atomics_compile() {
    for (src, file, arch) in [(SM80, "atomic_sm80.cake", "sm_80"), (BF16, "atomic_bf16.cake", "sm_90a")] {
        let b = build(src, file);
        assert_eq!(&b.cubin[..4], b"\x7fELF", "{file}");
        assert_eq!(b.report.arch, arch);
        assert_eq!(b.report.spills(), 0, "{file}: spills\n{}", b.log);
    }
    let b = build(&column_stats(), "atomic-column-stats.cake");
    assert_eq!(b.report.spills(), 0, "spills\n{}", b.log);
    assert_eq!(b.report.stack_frame_bytes, 0, "stack\n{}", b.log);
}
