# seeded failure benchmark, class setmaxnreg-multiple (heldout; ablates V205): one edit
# base: gemm-grouped/f16-128x128-s6
# edit: line(s) 28 (line(s) 22 of the base case)
#   before: role load: warpgroup 0 regs 40
#   after:  role load: warpgroup 0 regs 34
# the producer's budget 34 is not a multiple of 8
# Grouped f16 GEMM for Hopper (mixture-of-experts style): tokens are sorted by group into A, G
# groups of MG rows each, and group g multiplies its rows with its own weight B[g]:
# C[g·MG + i, :] = A[g·MG + i, :] · B[g]ᵀ. Groups here have equal size — the language has no
# ragged (offset-table) dims yet — so the tile space is (g, m, n) and row windows start at
# g·MG. One producer warpgroup, 2 consumer warpgroup(s), a 6-stage TMA pipeline.
kernel ggemm_f16_128x128_s6 target sm_90a

dim G
dim MG multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: f16[G * MG, K] tma [128, 64] swizzle 128B
in B: f16[G, N, K] tma [1, 128, 64] swizzle 128B
out C: f16[G * MG, N]

grid tiles[g = G, m = MG / 128, n = N / 128]

smem a_s: f16[128, 64] stages 6 swizzle 128B align 1024
smem b_s: f16[128, 64] stages 6 swizzle 128B align 1024

role load: warpgroup 0 regs 34
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 6 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.g * MG + t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.g, t.n * 128 :+ 128, kb * 64 :+ 64], ab)
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
        store(C[t.g * MG + t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 128 :+ 128], cast(acc, f16))
    }
}
