# V418 (pipeline-op-outside-its-role): the X-tile pipeline declares its roles the wrong way round,
# `producer mma consumer load`: `load` acquires and fills stages of a pipeline it consumes, and the
# warpgroups of `mma` wait for and release the stages they are declared to produce. Based on
# examples/kmeans_assign.cake with this one change (`cs` keeps its roles).
# Flash-KMeans assign for Hopper: for every point, the index of its nearest centroid.
# argmin_k ‖x − c_k‖² = argmin_k (‖c_k‖² − 2·x·c_k), so distances come from one wgmma per
# centroid tile plus the centroid norms. A 128-point tile of X is loaded once per output
# tile (double-buffered, so the next tile's X arrives while this one is consumed); centroids
# and their norms stream through a 4-stage pipeline; each consumer warpgroup keeps a running
# min / argmin for its 64 points, and reduces one centroid tile while the tensor cores
# compute the next.
# Headline shape: B=32, N=65536, K=1024, D=128.
kernel kmeans_assign target sm_90a

dim B
dim N multiple_of 128
dim K multiple_of 128
dim D multiple_of 128

in X: bf16[B, N, D] tma [1, 128, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, 128, 64] swizzle 128B
in CN: f32[B, K] tma [1, 128]
out Idx: i32[B, N]

grid tiles[b = B, n = N / 128] persistent

smem x_s: bf16[2, 128, 64] stages 2 swizzle 128B align 1024
smem c_s: bf16[2, 128, 64] stages 4 swizzle 128B align 1024
smem cn_s: f32[128] stages 4

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline xp: stages 2 producer mma consumer load
pipeline cs: stages 4 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..2 {
            tma_load(x_s[xp.stage, dc], X[t.b, t.n * 128 :+ 128, dc * 64 :+ 64], xp)
        }
        for kt in 0..K / 128 {
            acquire(cs)
            for dc in 0..2 {
                tma_load(c_s[cs.stage, dc], C[t.b, kt * 128 :+ 128, dc * 64 :+ 64], cs)
            }
            tma_load(cn_s[cs.stage], CN[t.b, kt * 128 :+ 128], cs)
        }
    }
}

on mma {
    reg acc: f32[64, 128] per warpgroup
    reg best_d: f32[64] per warpgroup
    reg best_i: i32[64] per warpgroup
    for t in tiles {
        wait(xp)
        fill(best_d, inf)
        fill(best_i, 0)
        # Software pipeline over centroid tiles: the distances of tile kt - 1 leave the
        # accumulator (as d = cn - 2·acc, one fma each) before tile kt's MMAs are issued into
        # it, so those MMAs run while this warpgroup reduces d. The first tile's MMAs are
        # issued ahead of the loop. reduce_argmin reuses the row minimum m.
        wait(cs)
        zero(acc)
        for dc in 0..2 {
            wgmma(acc, x_s[xp.stage, dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
        }
        wgmma_commit()
        for kt in 1..K / 128 {
            wgmma_wait(0)
            let d = fma(acc, -2.0, cn_s[cs.stage])
            release(cs)
            wait(cs)
            zero(acc)
            for dc in 0..2 {
                wgmma(acc, x_s[xp.stage, dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
            }
            wgmma_commit()
            let m = reduce_min(d, axis=1)
            let i = reduce_argmin(d, axis=1) + (kt - 1) * 128
            let better = m < best_d
            best_i = select(better, i, best_i)
            best_d = select(better, m, best_d)
        }
        # The last tile: nothing left to overlap with.
        wgmma_wait(0)
        let d = fma(acc, -2.0, cn_s[cs.stage])
        release(cs)
        release(xp)
        let m = reduce_min(d, axis=1)
        let i = reduce_argmin(d, axis=1) + (K / 128 - 1) * 128
        let better = m < best_d
        best_i = select(better, i, best_i)
        best_d = select(better, m, best_d)
        store(Idx[t.b, t.n * 128 + mma.warpgroup * 64 :+ 64], best_i)
    }
}
