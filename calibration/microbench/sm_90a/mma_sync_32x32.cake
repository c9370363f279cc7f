# Probe `mma-sync-loop` (calibration/microbench/sm_90a/README.md): bench mma-sync's loop with gemm-sm80's
# 64×64 block tile (2×2 warps of 32×32), operands resident: half the MMAs per ldmatrix byte of the
# 64×64-per-warp tile, so it shows what ldmatrix costs the smaller tile.
kernel mma_sync_32x32 target sm_90a

dim M multiple_of 64
dim N multiple_of 64
dim K multiple_of 32

in A: bf16[M, 32]
in B: bf16[N, 32]
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 64]

smem a_s: bf16[64, 32] swizzle 64B
smem b_s: bf16[64, 32] swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[32, 32] per warp
    reg a_f: bf16[32, 16] per warp
    reg b_f: bf16[32, 16] per warp
    for t in tiles {
        zero(acc)
        cp_async(a_s, A[t.m * 64 :+ 64, 0 :+ 32])
        cp_async(b_s, B[t.n * 64 :+ 64, 0 :+ 32])
        cp_async_commit()
        cp_async_wait(0)
        sync()
        for kb in 0..K / 32 {
            for ks in 0..2 {
                ldmatrix(a_f, a_s[all.warp / 2 * 32 :+ 32, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[all.warp % 2 * 32 :+ 32, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
            }
        }
        # The next tile's loads overwrite the tiles that slower warps may still be reading.
        sync()
        store(C[t.m * 64 + all.warp / 2 * 32 :+ 32, t.n * 64 + all.warp % 2 * 32 :+ 32], cast(acc, bf16))
    }
}
