# seeded failure benchmark, class setmaxnreg-multiple (heldout; ablates V205): one edit
# base: gemm-sm90-splitn/bf16-64x128-s4-p
# edit: line(s) 28 (line(s) 22 of the base case)
#   before: role mma: warpgroup 1..3 regs 160
#   after:  role mma: warpgroup 1..3 regs 164
# the consumers' budget 164 is not a multiple of 8
# Hopper GEMM with an N-split consumer pair: C = A · Bᵀ, bf16 operands (K-major), f32
# accumulators. The block tile is 64×128: one producer warpgroup streams 64×64 tiles of A and
# 128×64 tiles of B through a 4-stage TMA pipeline, and two consumer warpgroups share each
# A tile, each multiplying it with its own 64-row half of the B tile (a 64×64 accumulator).
# This keeps per-warpgroup accumulators small when M is short (decode-like shapes).
kernel gemm_bf16_splitn_64x128_s4_p target sm_90a

dim M multiple_of 64
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [64, 64] swizzle 128B
in B: bf16[N, K] tma [128, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 128] persistent

smem a_s: bf16[64, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[128, 64] stages 4 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 164

pipeline ab: stages 4 producer load consumer mma

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
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage], b_s[ab.stage, mma.warpgroup * 64 :+ 64])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 64 :+ 64, t.n * 128 + mma.warpgroup * 64 :+ 64], cast(acc, bf16))
    }
}
