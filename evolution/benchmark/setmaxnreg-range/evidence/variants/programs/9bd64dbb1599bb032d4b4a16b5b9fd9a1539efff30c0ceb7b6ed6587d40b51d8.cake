# seeded failure benchmark, class setmaxnreg-range (train; ablates V204): one edit
# base: gemm-sm90-ws/f16-128x64-s5
# edit: line(s) 27 (line(s) 21 of the base case)
#   before: role load: warpgroup 0 regs 40
#   after:  role load: warpgroup 0 regs 16
# the producer gives back down to 16 registers (setmaxnreg takes 24..256)
# Warp-specialized GEMM for Hopper: C = A · Bᵀ, A f16 and B f16 (both K-major),
# f32 accumulators, f16 output. One producer warpgroup streams 128×64 tiles of A and
# 64×64 tiles of B through a 5-stage TMA pipeline; 2 consumer warpgroup(s) each own
# 64 rows of the 128×64 output tile.
kernel gemm_f16_ws_128x64_s5 target sm_90a

dim M multiple_of 128
dim N multiple_of 64
dim K multiple_of 64

in A: f16[M, K] tma [128, 64] swizzle 128B
in B: f16[N, K] tma [64, 64] swizzle 128B
out C: f16[M, N]

grid tiles[m = M / 128, n = N / 64]

smem a_s: f16[128, 64] stages 5 swizzle 128B align 1024
smem b_s: f16[64, 64] stages 5 swizzle 128B align 1024

# The producer gives registers back to the consumers' 64-wide accumulators.
role load: warpgroup 0 regs 8
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 5 producer load consumer mma

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
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 64 :+ 64], cast(acc, f16))
    }
}
