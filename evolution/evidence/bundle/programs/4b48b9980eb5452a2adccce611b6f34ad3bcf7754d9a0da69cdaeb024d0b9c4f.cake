# BROKEN ON PURPOSE: evidence for the compiler-evolution engine (evolution/evidence/README.md).
# Bucket `smem` (shared memory over the per-block limit). Eleven 64-centroid stages and an x_s
# with three 64-column slices where D = 128 needs two (the loops use two). The regions add up to
# 232192 bytes, under the 232448 limit; with its 24 mbarriers and 1024 bytes to align the dynamic
# shared-memory base the launch needs 233408.
# Today: the verifier accepts it (it counts the regions only); the lowering refuses it (L002).
kernel smem_kmeans64_x3_s11 target sm_90a

dim B
dim N multiple_of 128
dim K multiple_of 128
dim D multiple_of 128

in X: bf16[B, N, D] tma [1, 128, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, 64, 64] swizzle 128B
in CN: f32[B, K] tma [1, 64]
out Idx: i32[B, N]

grid tiles[b = B, n = N / 128] persistent

smem x_s: bf16[3, 128, 64] swizzle 128B align 1024
smem c_s: bf16[2, 64, 64] stages 11 swizzle 128B align 1024
smem cn_s: f32[64] stages 11

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline xp: stages 1 producer load consumer mma
pipeline cs: stages 11 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..2 {
            tma_load(x_s[dc], X[t.b, t.n * 128 :+ 128, dc * 64 :+ 64], xp)
        }
        for kt in 0..K / 64 {
            acquire(cs)
            for dc in 0..2 {
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
            for dc in 0..2 {
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
