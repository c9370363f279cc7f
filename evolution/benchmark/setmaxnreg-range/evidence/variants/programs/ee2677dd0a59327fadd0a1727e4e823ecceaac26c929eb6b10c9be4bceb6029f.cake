# seeded failure benchmark, class setmaxnreg-range (train; ablates V204): one edit
# base: gemm-sm90-ws/bf16-64x128-s2
# edit: line(s) 28 (line(s) 22 of the base case)
#   before: role mma: warpgroup 1..2 regs 240
#   after:  role mma: warpgroup 1..2 regs 264
# the single consumer asks for 264 registers
# Warp-specialized GEMM for Hopper: C = A · Bᵀ, A bf16 and B bf16 (both K-major),
# f32 accumulators, bf16 output. One producer warpgroup streams 64×64 tiles of A and
# 128×64 tiles of B through a 2-stage TMA pipeline; 1 consumer warpgroup(s) each own
# 64 rows of the 64×128 output tile.
kernel gemm_bf16_ws_64x128_s2 target sm_90a

dim M multiple_of 64
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [64, 64] swizzle 128B
in B: bf16[N, K] tma [128, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 128]

smem a_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem b_s: bf16[128, 64] stages 2 swizzle 128B align 1024

# The producer gives registers back to the consumers' 128-wide accumulators.
role load: warpgroup 0 regs 32
role mma: warpgroup 1..2 regs 264

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 64 :+ 64, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 128 :+ 128, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 128] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 64 + mma.warpgroup * 64 :+ 64, t.n * 128 :+ 128], cast(acc, bf16))
    }
}
