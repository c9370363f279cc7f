# seeded failure benchmark, class setmaxnreg-multiple (train; ablates V205): one edit
# base: gemm-sm90-ws/bf16-128x64-s6
# edit: line(s) 28 (line(s) 22 of the base case)
#   before: role mma: warpgroup 1..3 regs 232
#   after:  role mma: warpgroup 1..3 regs 228
# the consumers' budget 228 is not a multiple of 8
# Warp-specialized GEMM for Hopper: C = A · Bᵀ, A bf16 and B bf16 (both K-major),
# f32 accumulators, bf16 output. One producer warpgroup streams 128×64 tiles of A and
# 64×64 tiles of B through a 6-stage TMA pipeline; 2 consumer warpgroup(s) each own
# 64 rows of the 128×64 output tile.
kernel gemm_bf16_ws_128x64_s6 target sm_90a

dim M multiple_of 128
dim N multiple_of 64
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [64, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 64]

smem a_s: bf16[128, 64] stages 6 swizzle 128B align 1024
smem b_s: bf16[64, 64] stages 6 swizzle 128B align 1024

# The producer gives registers back to the consumers' 64-wide accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 114

pipeline ab: stages 6 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 64 :+ 64, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 64 :+ 64], cast(acc, bf16))
    }
}
