# Flash-KMeans assign for Hopper, the deliberately naive seed of kernel evolution
# (contracts/kmeans-assign.toml): for every point, the index of its nearest centroid, through
# argmin_k ‖x − c_k‖² = argmin_k (‖c_k‖² − 2·x·c_k). One consumer warpgroup owns a 64-point tile;
# centroids and their norms stream through a one-stage pipeline; the MMAs of a centroid tile are
# waited for before its distances are reduced (no software pipelining, a serial epilogue); one
# block per tile. Derived from corpus/kmeans-assign's template. The tile shape, consumer count and
# register budget are consts, so parameter tactics rewrite const declarations; stage counts are
# attributes (a one-stage region has no stage axis, so the stages tactic also rewrites indexing).
kernel kmeans_assign target sm_90a

# Consumer warpgroups; each owns 64 points of the tile.
const WG = 2
const TN = 64 * WG
# Centroids per tile (the wgmma N).
const KT = 128
# Registers per consumer thread (setmaxnreg).
const MMA_REGS = 200

dim B
dim N multiple_of TN
dim K multiple_of KT
dim D multiple_of 128

in X: bf16[B, N, D] tma [1, TN, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, KT, 64] swizzle 128B
in CN: f32[B, K] tma [1, KT]
out Idx: i32[B, N]

grid tiles[b = B, n = N / TN] persistent group 16

# D = 128 in every contract shape: two 64-column chunks of a row.
smem x_s: bf16[2, TN, 64] stages 2 swizzle 128B align 1024
smem c_s: bf16[2, KT, 64] stages 2 swizzle 128B align 1024
smem cn_s: f32[KT] stages 2

role load: warpgroup 0 regs 40
role mma: warpgroup 1..1 + WG regs MMA_REGS

pipeline xp: stages 2 producer load consumer mma
pipeline cs: stages 2 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..2 {
            tma_load(x_s[xp.stage, dc], X[t.b, t.n * TN :+ TN, dc * 64 :+ 64], xp)
        }
        for kt in 0..K / KT unroll 2 {
            acquire(cs)
            for dc in 0..2 {
                tma_load(c_s[cs.stage, dc], C[t.b, kt * KT :+ KT, dc * 64 :+ 64], cs)
            }
            tma_load(cn_s[cs.stage], CN[t.b, kt * KT :+ KT], cs)
        }
    }
}

on mma {
    reg acc: f32[64, KT] per warpgroup
    reg best_d: f32[64] per warpgroup
    reg best_i: i32[64] per warpgroup
    for t in tiles {
        wait(xp)
        fill(best_d, inf)
        fill(best_i, 0)
        wait(cs)
        zero(acc)
        for dc in 0..2 {
            wgmma(acc, x_s[xp.stage, dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
        }
        wgmma_commit()
        for kt in 1..K / KT unroll 2 {
            wgmma_wait(0)
            let d = cn_s[cs.stage] - 2.0 * acc
            release(cs)
            wait(cs)
            zero(acc)
            for dc in 0..2 {
                wgmma(acc, x_s[xp.stage, dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
            }
            wgmma_commit()
            let m = reduce_min(d, axis=1)
            let i = reduce_argmin(d, axis=1) + (kt - 1) * KT
            let better = m < best_d
            best_i = select(better, i, best_i)
            best_d = select(better, m, best_d)
        }
        wgmma_wait(0)
        let d = cn_s[cs.stage] - 2.0 * acc
        release(cs)
        let m = reduce_min(d, axis=1)
        let i = reduce_argmin(d, axis=1) + (K / KT - 1) * KT
        let better = m < best_d
        best_i = select(better, i, best_i)
        best_d = select(better, m, best_d)
        release(xp)
        store(Idx[t.b, t.n * TN + mma.warpgroup * 64 :+ 64], best_i)
    }
}
