# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: gemm-batched/bf16-64x128-s3-p
# edit: line 37 (line 31 of the base case)
#   before: tma_load(b_s[ab.stage], B[t.b, t.n * 128 :+ 128, kb * 64 :+ 64], ab)
#   after:  tma_load(b_s[ab.stage], B[t.b, t.m * 128 :+ 128, kb * 64 :+ 64], ab)
# class: index: the B box takes its rows from the M tile axis
# Batched bf16 GEMM for Hopper: C[b] = A[b] · B[b]ᵀ for every batch entry b (strided batch, as in
# the attention projections of a multi-head layer). The batch is an axis of the tile space, so a
# persistent grid walks (b, m, n) tiles; 3-D TMA boxes [1, rows, 64] fetch one batch entry's tile.
# One producer warpgroup, 1 consumer warpgroup(s) of 64 rows each, a 3-stage pipeline.
kernel bgemm_bf16_64x128_s3_p target sm_90a

dim BATCH
dim M multiple_of 64
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[BATCH, M, K] tma [1, 64, 64] swizzle 128B
in B: bf16[BATCH, N, K] tma [1, 128, 64] swizzle 128B
out C: bf16[BATCH, M, N]

grid tiles[b = BATCH, m = M / 64, n = N / 128] persistent

smem a_s: bf16[64, 64] stages 3 swizzle 128B align 1024
smem b_s: bf16[128, 64] stages 3 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 240

pipeline ab: stages 3 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.b, t.m * 64 :+ 64, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.b, t.m * 128 :+ 128, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 128] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.b, t.m * 64 + mma.warpgroup * 64 :+ 64, t.n * 128 :+ 128], cast(acc, bf16))
    }
}
