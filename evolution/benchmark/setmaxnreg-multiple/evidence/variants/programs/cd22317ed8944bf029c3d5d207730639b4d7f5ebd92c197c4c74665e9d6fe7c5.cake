# seeded failure benchmark, class setmaxnreg-multiple (train; ablates V205): one edit
# base: gemm-batched/bf16-128x64-s2-p
# edit: line(s) 28 (line(s) 22 of the base case)
#   before: role mma: warpgroup 1..3 regs 232
#   after:  role mma: warpgroup 1..3 regs 220
# the consumers' budget 220 is not a multiple of 8
# Batched bf16 GEMM for Hopper: C[b] = A[b] · B[b]ᵀ for every batch entry b (strided batch, as in
# the attention projections of a multi-head layer). The batch is an axis of the tile space, so a
# persistent grid walks (b, m, n) tiles; 3-D TMA boxes [1, rows, 64] fetch one batch entry's tile.
# One producer warpgroup, 2 consumer warpgroup(s) of 64 rows each, a 2-stage pipeline.
kernel bgemm_bf16_128x64_s2_p target sm_90a

dim BATCH
dim M multiple_of 128
dim N multiple_of 64
dim K multiple_of 64

in A: bf16[BATCH, M, K] tma [1, 128, 64] swizzle 128B
in B: bf16[BATCH, N, K] tma [1, 64, 64] swizzle 128B
out C: bf16[BATCH, M, N]

grid tiles[b = BATCH, m = M / 128, n = N / 64] persistent

smem a_s: bf16[128, 64] stages 2 swizzle 128B align 1024
smem b_s: bf16[64, 64] stages 2 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 224

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.b, t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.b, t.n * 64 :+ 64, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.b, t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 64 :+ 64], cast(acc, bf16))
    }
}
