# BROKEN ON PURPOSE: evidence for the compiler-evolution engine (evolution/evidence/README.md).
# Bucket `stride` (cp.async row stride not a multiple of 16 bytes). A variant of corpus/gemm-sm80
# sm_89-bf16-64x128-s3 with K only a multiple of 60: rows of 120·n bytes.
# Today: the verifier accepts it (V901: V214 undecided); the lowering refuses it (L006).
kernel stride_gemm89_k60 target sm_89

dim M multiple_of 64
dim N multiple_of 128
dim K multiple_of 60

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 128]

smem a_s: bf16[64, 32] stages 3 swizzle 64B
smem b_s: bf16[128, 32] stages 3 swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[32, 64] per warp
    reg a_f: bf16[32, 16] per warp
    reg b_f: bf16[64, 16] per warp
    for t in tiles {
        zero(acc)
        # Prologue: fill all but one stage.
        for s in 0..2 {
            cp_async(a_s[s], A[t.m * 64 :+ 64, s * 32 :+ 32])
            cp_async(b_s[s], B[t.n * 128 :+ 128, s * 32 :+ 32])
            cp_async_commit()
        }
        for kb in 0..K / 32 {
            cp_async_wait(1)
            sync()
            if kb + 2 < K / 32 {
                cp_async(a_s[(kb + 2) % 3], A[t.m * 64 :+ 64, (kb + 2) * 32 :+ 32])
                cp_async(b_s[(kb + 2) % 3], B[t.n * 128 :+ 128, (kb + 2) * 32 :+ 32])
            }
            cp_async_commit()
            for ks in 0..2 {
                ldmatrix(a_f, a_s[kb % 3, all.warp / 2 * 32 :+ 32, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[kb % 3, all.warp % 2 * 64 :+ 64, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
            }
        }
        # The next tile's prologue overwrites stages that slower warps may still be reading.
        sync()
        store(C[t.m * 64 + all.warp / 2 * 32 :+ 32, t.n * 128 + all.warp % 2 * 64 :+ 64], cast(acc, bf16))
    }
}
