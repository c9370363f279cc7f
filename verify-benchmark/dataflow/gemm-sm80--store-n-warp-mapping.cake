# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: gemm-sm80/sm_90a-f16-64x64-s4
# edit: line 55 (line 49 of the base case)
#   before: store(C[t.m * 64 + all.warp / 2 * 32 :+ 32, t.n * 64 + all.warp % 2 * 32 :+ 32], cast(acc, f16))
#   after:  store(C[t.m * 64 + all.warp / 2 * 32 :+ 32, t.n * 64 + all.warp / 2 * 32 :+ 32], cast(acc, f16))
# class: index: the output column window uses the row warp mapping (warp / 2)
# Ampere-style f16 GEMM on sm_90a: C = A · Bᵀ with mma.sync, ldmatrix and a 4-stage cp.async
# pipeline. Four warps share a 64×64 block tile (2×2 warps of 32×32); every warp both
# loads and computes, so stages are guarded by cp.async groups and a block-wide barrier.
kernel gemm_f16_sm_90a_64x64_s4 target sm_90a

dim M multiple_of 64
dim N multiple_of 64
dim K multiple_of 32

in A: f16[M, K]
in B: f16[N, K]
out C: f16[M, N]

grid tiles[m = M / 64, n = N / 64]

smem a_s: f16[64, 32] stages 4 swizzle 64B
smem b_s: f16[64, 32] stages 4 swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[32, 32] per warp
    reg a_f: f16[32, 16] per warp
    reg b_f: f16[32, 16] per warp
    for t in tiles {
        zero(acc)
        # Prologue: fill all but one stage.
        for s in 0..3 {
            cp_async(a_s[s], A[t.m * 64 :+ 64, s * 32 :+ 32])
            cp_async(b_s[s], B[t.n * 64 :+ 64, s * 32 :+ 32])
            cp_async_commit()
        }
        for kb in 0..K / 32 {
            cp_async_wait(2)
            sync()
            if kb + 3 < K / 32 {
                cp_async(a_s[(kb + 3) % 4], A[t.m * 64 :+ 64, (kb + 3) * 32 :+ 32])
                cp_async(b_s[(kb + 3) % 4], B[t.n * 64 :+ 64, (kb + 3) * 32 :+ 32])
            }
            cp_async_commit()
            for ks in 0..2 {
                ldmatrix(a_f, a_s[kb % 4, all.warp / 2 * 32 :+ 32, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[kb % 4, all.warp % 2 * 32 :+ 32, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
            }
        }
        # The next tile's prologue overwrites stages that slower warps may still be reading.
        sync()
        store(C[t.m * 64 + all.warp / 2 * 32 :+ 32, t.n * 64 + all.warp / 2 * 32 :+ 32], cast(acc, f16))
    }
}
