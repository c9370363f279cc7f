# V229 (ldmatrix-fragment-not-mma-operand): `t_f` is filled by ldmatrix but no mma_sync takes it as an
# A or B operand, so it has no register layout to fill (check accepted this before V229; lower refused, L007).
# Based on examples/gemm_bf16_sm80.cake with this change.
# Ampere bf16 GEMM: C = A · Bᵀ with mma.sync, ldmatrix and a 3-stage cp.async pipeline.
# Four warps share a 128×128 block tile (2×2 warps of 64×64); every warp both loads and
# computes, so stages are guarded by cp.async groups and a block-wide barrier.
kernel gemm_bf16_sm80 target sm_80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] stages 3 swizzle 64B
smem b_s: bf16[128, 32] stages 3 swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[64, 64] per warp
    reg a_f: bf16[64, 16] per warp
    reg b_f: bf16[64, 16] per warp
    reg t_f: bf16[64, 16] per warp
    for t in tiles {
        zero(acc)
        for s in 0..2 {
            cp_async(a_s[s], A[t.m * 128 :+ 128, s * 32 :+ 32])
            cp_async(b_s[s], B[t.n * 128 :+ 128, s * 32 :+ 32])
            cp_async_commit()
        }
        for kb in 0..K / 32 {
            cp_async_wait(1)
            sync()
            if kb + 2 < K / 32 {
                cp_async(a_s[(kb + 2) % 3], A[t.m * 128 :+ 128, (kb + 2) * 32 :+ 32])
                cp_async(b_s[(kb + 2) % 3], B[t.n * 128 :+ 128, (kb + 2) * 32 :+ 32])
            }
            cp_async_commit()
            for ks in 0..2 {
                ldmatrix(a_f, a_s[kb % 3, all.warp / 2 * 64 :+ 64, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[kb % 3, all.warp % 2 * 64 :+ 64, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
                ldmatrix(t_f, a_s[kb % 3, all.warp / 2 * 64 :+ 64, ks * 16 :+ 16])
            }
        }
        # The next tile's prologue overwrites stages that slower warps may still be reading.
        sync()
        store(C[t.m * 128 + all.warp / 2 * 64 :+ 64, t.n * 128 + all.warp % 2 * 64 :+ 64], cast(acc, bf16))
    }
}
