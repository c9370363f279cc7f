# V954 (coverage limit): both k-loops run r + 1 times inside a loop over r (a triangular nest); trip counts over
# an outer loop's variable are compared on samples only (those over dims, constants and tile coordinates are
# compared symbolically).
# Based on examples/gemm_bf16_ws.cake with this one change.
# Warp-specialized persistent bf16 GEMM for Hopper: C = A · Bᵀ (both operands K-major).
# One producer warpgroup streams 128×64 tiles of A and 256×64 tiles of B through a
# 4-stage TMA pipeline; two consumer warpgroups each own 64 rows of the 128×256 tile.
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024

# The producer gives registers back so the consumers can hold 64×256 fp32 accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for r in 0..2 {
            for kb in 0..r + 1 {
                acquire(ab)
                tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
                tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, kb * 64 :+ 64], ab)
            }
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for r in 0..2 {
            for kb in 0..r + 1 {
                wait(ab)
                wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
                wgmma_commit()
                wgmma_wait(0)
                release(ab)
            }
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
