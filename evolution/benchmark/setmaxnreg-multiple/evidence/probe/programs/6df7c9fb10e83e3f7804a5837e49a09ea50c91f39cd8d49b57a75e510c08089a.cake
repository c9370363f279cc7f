# seeded failure benchmark, class setmaxnreg-multiple (probe; ablates V205): a LEGAL probe just inside the boundary
# base: gemm-grouped/bf16-64x256-s2-p
# edit: line(s) 29 (line(s) 23 of the base case)
#   before: role mma: warpgroup 1..2 regs 240
#   after:  role mma: warpgroup 1..2 regs 248
# the consumer at 248, a multiple of 8
# Grouped bf16 GEMM for Hopper (mixture-of-experts style): tokens are sorted by group into A, G
# groups of MG rows each, and group g multiplies its rows with its own weight B[g]:
# C[g·MG + i, :] = A[g·MG + i, :] · B[g]ᵀ. Groups here have equal size — the language has no
# ragged (offset-table) dims yet — so the tile space is (g, m, n) and row windows start at
# g·MG. One producer warpgroup, 1 consumer warpgroup(s), a 2-stage TMA pipeline.
kernel ggemm_bf16_64x256_s2_p target sm_90a

dim G
dim MG multiple_of 64
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[G * MG, K] tma [64, 64] swizzle 128B
in B: bf16[G, N, K] tma [1, 256, 64] swizzle 128B
out C: bf16[G * MG, N]

grid tiles[g = G, m = MG / 64, n = N / 256] persistent

smem a_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 2 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 248

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.g * MG + t.m * 64 :+ 64, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.g, t.n * 256 :+ 256, kb * 64 :+ 64], ab)
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
        store(C[t.g * MG + t.m * 64 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
