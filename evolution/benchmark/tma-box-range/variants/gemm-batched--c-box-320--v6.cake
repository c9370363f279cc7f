# seeded failure benchmark, class tma-box-range (train; ablates V211): one edit
# base: gemm-batched/bf16-64x64-s6
# edit: line(s) 20 (line(s) 14 of the base case)
#   before: out C: bf16[BATCH, M, N]
#   after:  out C: bf16[BATCH, M, N] tma [1, 64, 320]
# the output declares a [1, 64, 320] TMA box
# Batched bf16 GEMM for Hopper: C[b] = A[b] · B[b]ᵀ for every batch entry b (strided batch, as in
# the attention projections of a multi-head layer). The batch is an axis of the tile space, so a
# grid walks (b, m, n) tiles; 3-D TMA boxes [1, rows, 64] fetch one batch entry's tile.
# One producer warpgroup, 1 consumer warpgroup(s) of 64 rows each, a 6-stage pipeline.
kernel bgemm_bf16_64x64_s6 target sm_90a

dim BATCH
dim M multiple_of 64
dim N multiple_of 64
dim K multiple_of 64

in A: bf16[BATCH, M, K] tma [1, 64, 64] swizzle 128B
in B: bf16[BATCH, N, K] tma [1, 64, 64] swizzle 128B
out C: bf16[BATCH, M, N] tma [1, 320, 64]

grid tiles[b = BATCH, m = M / 64, n = N / 64]

smem a_s: bf16[64, 64] stages 6 swizzle 128B align 1024
smem b_s: bf16[64, 64] stages 6 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 240

pipeline ab: stages 6 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.b, t.m * 64 :+ 64, kb * 64 :+ 64], ab)
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
        store(C[t.b, t.m * 64 + mma.warpgroup * 64 :+ 64, t.n * 64 :+ 64], cast(acc, bf16))
    }
}
