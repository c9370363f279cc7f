# BROKEN ON PURPOSE: evidence for the compiler-evolution engine (evolution/evidence/README.md).
# Bucket `stride` (cp.async row stride not a multiple of 16 bytes). A variant of corpus/gemm-sm80
# sm_80-bf16-128x128-s4 with K only a multiple of 20: rows of 40·n bytes, 16-byte cp.async copies
# misaligned on odd rows whenever K/20 is odd.
# Today: the verifier accepts it (V901: V214 undecided); the lowering refuses it (L006).
kernel stride_gemm80_s4_k20 target sm_80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 20

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] stages 4 swizzle 64B
smem b_s: bf16[128, 32] stages 4 swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[64, 64] per warp
    reg a_f: bf16[64, 16] per warp
    reg b_f: bf16[64, 16] per warp
    for t in tiles {
        zero(acc)
        # Prologue: fill all but one stage.
        for s in 0..3 {
            cp_async(a_s[s], A[t.m * 128 :+ 128, s * 32 :+ 32])
            cp_async(b_s[s], B[t.n * 128 :+ 128, s * 32 :+ 32])
            cp_async_commit()
        }
        for kb in 0..K / 32 {
            cp_async_wait(2)
            sync()
            if kb + 3 < K / 32 {
                cp_async(a_s[(kb + 3) % 4], A[t.m * 128 :+ 128, (kb + 3) * 32 :+ 32])
                cp_async(b_s[(kb + 3) % 4], B[t.n * 128 :+ 128, (kb + 3) * 32 :+ 32])
            }
            cp_async_commit()
            for ks in 0..2 {
                ldmatrix(a_f, a_s[kb % 4, all.warp / 2 * 64 :+ 64, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[kb % 4, all.warp % 2 * 64 :+ 64, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
            }
        }
        # The next tile's prologue overwrites stages that slower warps may still be reading.
        sync()
        store(C[t.m * 128 + all.warp / 2 * 64 :+ 64, t.n * 128 + all.warp % 2 * 64 :+ 64], cast(acc, bf16))
    }
}
