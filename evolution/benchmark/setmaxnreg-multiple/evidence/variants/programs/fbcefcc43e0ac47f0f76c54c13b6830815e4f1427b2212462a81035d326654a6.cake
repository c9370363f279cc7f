# seeded failure benchmark, class setmaxnreg-multiple (train; ablates V205): one edit
# base: kmeans-assign/d64-128x64-s6
# edit: line(s) 31 (line(s) 25 of the base case)
#   before: role mma: warpgroup 1..3 regs 232
#   after:  role mma: warpgroup 1..3 regs 230
# the consumers' budget 230 is not a multiple of 8
# Flash-KMeans assign for Hopper: for every point, the index of its nearest centroid, D = 64.
# argmin_k ‖x − c_k‖² = argmin_k (‖c_k‖² − 2·x·c_k), so distances come from wgmmas over 1
# 64-wide slices of D per centroid tile plus the centroid norms CN. A 128-point tile of X is loaded
# once per output tile; 64-centroid tiles and their norms stream through a 6-stage pipeline;
# each of the 2 consumer warpgroup(s) keeps a running min / argmin for its 64 points.
kernel kmeans_assign_d64_128x64_s6 target sm_90a

dim B
dim N multiple_of 128
dim K multiple_of 64
const D = 64

in X: bf16[B, N, D] tma [1, 128, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, 64, 64] swizzle 128B
in CN: f32[B, K] tma [1, 64]
out Idx: i32[B, N]

grid tiles[b = B, n = N / 128]

smem x_s: bf16[1, 128, 64] swizzle 128B align 1024
smem c_s: bf16[1, 64, 64] stages 6 swizzle 128B align 1024
smem cn_s: f32[64] stages 6

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 231

pipeline xp: stages 1 producer load consumer mma
pipeline cs: stages 6 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..D / 64 {
            tma_load(x_s[dc], X[t.b, t.n * 128 :+ 128, dc * 64 :+ 64], xp)
        }
        for kt in 0..K / 64 {
            acquire(cs)
            for dc in 0..D / 64 {
                tma_load(c_s[cs.stage, dc], C[t.b, kt * 64 :+ 64, dc * 64 :+ 64], cs)
            }
            tma_load(cn_s[cs.stage], CN[t.b, kt * 64 :+ 64], cs)
        }
    }
}

on mma {
    reg acc: f32[64, 64] per warpgroup
    reg best_d: f32[64] per warpgroup
    reg best_i: i32[64] per warpgroup
    for t in tiles {
        wait(xp)
        fill(best_d, inf)
        fill(best_i, 0)
        for kt in 0..K / 64 {
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
            let i = reduce_argmin(d, axis=1) + kt * 64
            let better = m < best_d
            best_i = select(better, i, best_i)
            best_d = select(better, m, best_d)
        }
        release(xp)
        store(Idx[t.b, t.n * 128 + mma.warpgroup * 64 :+ 64], best_i)
    }
}
