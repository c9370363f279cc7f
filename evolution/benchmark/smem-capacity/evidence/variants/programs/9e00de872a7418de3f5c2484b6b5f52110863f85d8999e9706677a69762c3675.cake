# seeded failure benchmark, class smem-capacity (train; ablates V201): one edit
# base: gemm-sm90-ws/bf16-128x256-s4
# edit: line(s) 23, 24, 30 (line(s) 17, 18, 24 of the base case)
#   before: smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024 | smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024 | pipeline ab: stages 4 producer load consumer mma
#   after:  smem a_s: bf16[128, 64] stages 5 swizzle 128B align 1024 | smem b_s: bf16[256, 64] stages 5 swizzle 128B align 1024 | pipeline ab: stages 5 producer load consumer mma
# a fifth 48 KB stage of the 128x256 tiles: 246 KB of shared memory
# Warp-specialized GEMM for Hopper: C = A · Bᵀ, A bf16 and B bf16 (both K-major),
# f32 accumulators, bf16 output. One producer warpgroup streams 128×64 tiles of A and
# 256×64 tiles of B through a 4-stage TMA pipeline; 2 consumer warpgroup(s) each own
# 64 rows of the 128×256 output tile.
kernel gemm_bf16_ws_128x256_s4 target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256]

smem a_s: bf16[128, 64] stages 2 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 2 swizzle 128B align 1024

# The producer gives registers back to the consumers' 256-wide accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
