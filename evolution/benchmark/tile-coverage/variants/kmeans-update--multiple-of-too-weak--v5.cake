# seeded failure benchmark, class tile-coverage (train; ablates V320, V321, V323): one edit
# base: kmeans-update/128x64-s5
# edit: line(s) 19 (line(s) 13 of the base case)
#   before: dim D multiple_of 128
#   after:  dim D multiple_of 64
# D multiple_of 64 with 128-row tiles: D = 192 leaves its last 64 rows unwritten
# KMeans centroid update for Hopper, as a one-hot GEMM with the 1/count scaling fused: the new
# centroids, transposed, are CT[b] = XT[b] · OH[b]ᵀ · diag(1/count), where OH[b, k, n] = 1 when
# point n is assigned to centroid k (the assign step's output, one-hot, K×N) and XT holds the points
# transposed (D×N, so both operands are K-major over the points). The reduction runs over N in
# 64-point slices through a 5-stage TMA pipeline; 2 consumer warpgroup(s) own 64 of the 128
# feature rows of a 128×64 output tile. (The catalog has no atomics, so the scatter-add form of
# the update cannot be written; the one-hot GEMM is the tensor-core formulation.)
kernel kmeans_update_128x64_s5 target sm_90a

dim B
dim N multiple_of 63
dim K multiple_of 63
dim D multiple_of 63

in XT: bf16[B, D, N] tma [1, 128, 64] swizzle 128B
in OH: bf16[B, K, N] tma [1, 64, 64] swizzle 128B
in ICNT: f32[B, K]
out CT: f32[B, D, K]

grid tiles[b = B, d = D / 128, k = K / 64]

smem x_s: bf16[128, 64] stages 5 swizzle 128B align 1024
smem o_s: bf16[64, 64] stages 5 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 5 producer load consumer mma

on load {
    for t in tiles {
        for nb in 0..N / 64 {
            acquire(ab)
            tma_load(x_s[ab.stage], XT[t.b, t.d * 128 :+ 128, nb * 64 :+ 64], ab)
            tma_load(o_s[ab.stage], OH[t.b, t.k * 64 :+ 64, nb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for nb in 0..N / 64 {
            wait(ab)
            wgmma(acc, x_s[ab.stage, mma.warpgroup * 64 :+ 64], o_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        # Sums → means: scale column k by 1/count(k) (ICNT; 0 for an empty cluster).
        store(CT[t.b, t.d * 128 + mma.warpgroup * 64 :+ 64, t.k * 64 :+ 64], acc * ICNT[t.b, t.k * 64 :+ 64])
    }
}
