# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: gemm-batched/f16-64x256-s4
# edit: line 22 (line 16 of the base case)
#   before: grid tiles[b = BATCH, m = M / 64, n = N / 256]
#   after:  grid tiles[b = BATCH / 2, m = M / 64, n = N / 256]
# class: coverage: a batch tile axis of BATCH/2
# Batched f16 GEMM for Hopper: C[b] = A[b] · B[b]ᵀ for every batch entry b (strided batch, as in
# the attention projections of a multi-head layer). The batch is an axis of the tile space, so a
# grid walks (b, m, n) tiles; 3-D TMA boxes [1, rows, 64] fetch one batch entry's tile.
# One producer warpgroup, 1 consumer warpgroup(s) of 64 rows each, a 4-stage pipeline.
kernel bgemm_f16_64x256_s4 target sm_90a

dim BATCH
dim M multiple_of 64
dim N multiple_of 256
dim K multiple_of 64

in A: f16[BATCH, M, K] tma [1, 64, 64] swizzle 128B
in B: f16[BATCH, N, K] tma [1, 256, 64] swizzle 128B
out C: f16[BATCH, M, N]

grid tiles[b = BATCH / 2, m = M / 64, n = N / 256]

smem a_s: f16[64, 64] stages 4 swizzle 128B align 1024
smem b_s: f16[256, 64] stages 4 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 240

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.b, t.m * 64 :+ 64, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.b, t.n * 256 :+ 256, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.b, t.m * 64 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, f16))
    }
}
