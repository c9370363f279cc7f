# seeded failure benchmark, class tma-inner-box-16b (train; ablates V212): one edit
# base: kmeans-assign/d128-64x128-s4
# edit: line(s) 22 (line(s) 16 of the base case)
#   before: out Idx: i32[B, N]
#   after:  out Idx: i32[B, N] tma [1, 66]
# the index output's box is 66 i32 wide: 264 B
# Flash-KMeans assign for Hopper: for every point, the index of its nearest centroid, D = 128.
# argmin_k ‖x − c_k‖² = argmin_k (‖c_k‖² − 2·x·c_k), so distances come from wgmmas over 2
# 64-wide slices of D per centroid tile plus the centroid norms CN. A 64-point tile of X is loaded
# once per output tile; 128-centroid tiles and their norms stream through a 4-stage pipeline;
# each of the 1 consumer warpgroup(s) keeps a running min / argmin for its 64 points.
kernel kmeans_assign_d128_64x128_s4 target sm_90a

dim B
dim N multiple_of 64
dim K multiple_of 128
const D = 128

in X: bf16[B, N, D] tma [1, 64, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, 128, 64] swizzle 128B
in CN: f32[B, K] tma [1, 128]
out Idx: i32[B, N] tma [1, 58]

grid tiles[b = B, n = N / 64]

smem x_s: bf16[2, 64, 64] swizzle 128B align 1024
smem c_s: bf16[2, 128, 64] stages 4 swizzle 128B align 1024
smem cn_s: f32[128] stages 4

role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 240

pipeline xp: stages 1 producer load consumer mma
pipeline cs: stages 4 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..D / 64 {
            tma_load(x_s[dc], X[t.b, t.n * 64 :+ 64, dc * 64 :+ 64], xp)
        }
        for kt in 0..K / 128 {
            acquire(cs)
            for dc in 0..D / 64 {
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
        for kt in 0..K / 128 {
            wait(cs)
            zero(acc)
            for dc in 0..D / 64 {
                wgmma(acc, x_s[dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
            }
            wgmma_commit()
            wgmma_wait(0)
            let d = cn_s[cs.stage] - 2.0 * acc
            release(cs)
            let m = reduce_min(d, axis=1)
            let i = reduce_argmin(d, axis=1) + kt * 128
            let better = m < best_d
            best_i = select(better, i, best_i)
            best_d = select(better, m, best_d)
        }
        release(xp)
        store(Idx[t.b, t.n * 64 + mma.warpgroup * 64 :+ 64], best_i)
    }
}
