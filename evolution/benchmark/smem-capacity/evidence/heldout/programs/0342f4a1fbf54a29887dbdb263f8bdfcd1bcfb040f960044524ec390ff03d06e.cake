# seeded failure benchmark, class smem-capacity (heldout; ablates V201): one edit
# base: gemm-sm90-splitn/bf16-64x256-s5
# edit: line(s) 24, 25, 30 (line(s) 18, 19, 24 of the base case)
#   before: smem a_s: bf16[64, 64] stages 5 swizzle 128B align 1024 | smem b_s: bf16[256, 64] stages 5 swizzle 128B align 1024 | pipeline ab: stages 5 producer load consumer mma
#   after:  smem a_s: bf16[64, 64] stages 6 swizzle 128B align 1024 | smem b_s: bf16[256, 64] stages 6 swizzle 128B align 1024 | pipeline ab: stages 6 producer load consumer mma
# a sixth 40 KB stage of the 64x256 split-N tiles
# Hopper GEMM with an N-split consumer pair: C = A · Bᵀ, bf16 operands (K-major), f32
# accumulators. The block tile is 64×256: one producer warpgroup streams 64×64 tiles of A and
# 256×64 tiles of B through a 5-stage TMA pipeline, and two consumer warpgroups share each
# A tile, each multiplying it with its own 128-row half of the B tile (a 64×128 accumulator).
# This keeps per-warpgroup accumulators small when M is short (decode-like shapes).
kernel gemm_bf16_splitn_64x256_s5 target sm_90a

dim M multiple_of 64
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [64, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 256]

smem a_s: bf16[64, 64] stages 6 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 6 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 6 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 64 :+ 64, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 128] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage], b_s[ab.stage, mma.warpgroup * 128 :+ 128])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 64 :+ 64, t.n * 256 + mma.warpgroup * 128 :+ 128], cast(acc, bf16))
    }
}
