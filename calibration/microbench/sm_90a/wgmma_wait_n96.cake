# Exposed wgmma drain (calibration/microbench/sm_90a/README.md, bench `wgmma-wait`): one consumer warpgroup
# per SM issues a single m64n96k16 wgmma, commits it and waits for it with wgmma_wait(0) before the next,
# over operands resident in shared memory (loaded once per tile). Nothing else shares the tensor core, so
# each step takes the MMA's own time plus the drain the cost model charges per wgmma_wait(0).
kernel wgmma_wait_n96 target sm_90a

dim M multiple_of 64
dim N multiple_of 96
dim K multiple_of 64

in A: bf16[M, 64] tma [64, 64] swizzle 128B
in B: bf16[N, 64] tma [96, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 96] persistent

smem a_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem b_s: bf16[96, 64] stages 2 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1 regs 232

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        acquire(ab)
        tma_load(a_s[ab.stage], A[t.m * 64 :+ 64, 0 :+ 64], ab)
        tma_load(b_s[ab.stage], B[t.n * 96 :+ 96, 0 :+ 64], ab)
    }
}

on mma {
    reg acc: f32[64, 96] per warpgroup
    for t in tiles {
        zero(acc)
        wait(ab)
        for kb in 0..K / 64 {
            for kk in 0..4 {
                wgmma(acc, a_s[ab.stage, 0 :+ 64, kk * 16 :+ 16], b_s[ab.stage, 0 :+ 96, kk * 16 :+ 16])
                wgmma_commit()
                wgmma_wait(0)
            }
        }
        release(ab)
        store(C[t.m * 64 :+ 64, t.n * 96 :+ 96], cast(acc, bf16))
    }
}
