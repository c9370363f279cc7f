# Probe `mma-sync-loop` (calibration/microbench/sm_90a/README.md): bench mma-sync's program with a block
# barrier per 32-wide k step, as gemm-sm80's cp.async loop has, operands still resident: what the
# barrier alone costs the loop.
kernel mma_sync_64x64_sync target sm_90a

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 32

in A: bf16[M, 32]
in B: bf16[N, 32]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] swizzle 64B
smem b_s: bf16[128, 32] swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[64, 64] per warp
    reg a_f: bf16[64, 16] per warp
    reg b_f: bf16[64, 16] per warp
    for t in tiles {
        zero(acc)
        cp_async(a_s, A[t.m * 128 :+ 128, 0 :+ 32])
        cp_async(b_s, B[t.n * 128 :+ 128, 0 :+ 32])
        cp_async_commit()
        cp_async_wait(0)
        sync()
        for kb in 0..K / 32 {
            # A block barrier per 32-wide k step, as gemm-sm80's cp.async loop has.
            sync()
            for ks in 0..2 {
                ldmatrix(a_f, a_s[all.warp / 2 * 64 :+ 64, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[all.warp % 2 * 64 :+ 64, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
            }
        }
        # The next tile's loads overwrite the tiles that slower warps may still be reading.
        sync()
        store(C[t.m * 128 + all.warp / 2 * 64 :+ 64, t.n * 128 + all.warp % 2 * 64 :+ 64], cast(acc, bf16))
    }
}
