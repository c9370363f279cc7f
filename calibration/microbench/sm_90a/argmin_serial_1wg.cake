# Arg-reduction epilogue of one lone warpgroup (calibration/microbench/sm_90a/README.md, bench
# `argmin-1wg`): argmin_serial.cake with 64-row tiles and one consumer warpgroup, so each of its
# four warps is alone on its scheduler, and nothing hides its epilogue (the reductions after its
# own MMAs) or its MMAs. With arg_index_alu_slots fitted by bench `argmin`, its time is the lone
# warps' issue share (single_warp_issue_efficiency); the corpus's 64-row kmeans-assign and knn-topk
# tiles run this way.
kernel argmin_serial_1wg target sm_90a

dim B
dim N multiple_of 64
dim K multiple_of 128
dim D multiple_of 128

in X: bf16[B, N, D] tma [1, 64, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, 128, 64] swizzle 128B
in CN: f32[B, K] tma [1, 128]
out Idx: i32[B, N]

grid tiles[b = B, n = N / 64] persistent

smem x_s: bf16[2, 64, 64] swizzle 128B align 1024
smem c_s: bf16[2, 128, 64] stages 4 swizzle 128B align 1024
smem cn_s: f32[128] stages 4

role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 232

pipeline xp: stages 1 producer load consumer mma
pipeline cs: stages 4 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..2 {
            tma_load(x_s[dc], X[t.b, t.n * 64 :+ 64, dc * 64 :+ 64], xp)
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
        for kt in 0..K / 128 {
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
            let i = reduce_argmin(d, axis=1) + kt * 128
            let better = m < best_d
            best_i = select(better, i, best_i)
            best_d = select(better, m, best_d)
        }
        release(xp)
        store(Idx[t.b, t.n * 64 + mma.warpgroup * 64 :+ 64], best_i)
    }
}
