# seeded failure benchmark, class smem-capacity (train; ablates V201): one edit
# base: gemm-batched/bf16-128x256-s4-p
# edit: line(s) 24, 25, 30 (line(s) 18, 19, 24 of the base case)
#   before: smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024 | smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024 | pipeline ab: stages 4 producer load consumer mma
#   after:  smem a_s: bf16[128, 64] stages 6 swizzle 128B align 1024 | smem b_s: bf16[256, 64] stages 6 swizzle 128B align 1024 | pipeline ab: stages 6 producer load consumer mma
# six 48 KB stages of the 128x256 batched tiles
# Batched bf16 GEMM for Hopper: C[b] = A[b] · B[b]ᵀ for every batch entry b (strided batch, as in
# the attention projections of a multi-head layer). The batch is an axis of the tile space, so a
# persistent grid walks (b, m, n) tiles; 3-D TMA boxes [1, rows, 64] fetch one batch entry's tile.
# One producer warpgroup, 2 consumer warpgroup(s) of 64 rows each, a 4-stage pipeline.
kernel bgemm_bf16_128x256_s4_p target sm_90a

dim BATCH
dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[BATCH, M, K] tma [1, 128, 64] swizzle 128B
in B: bf16[BATCH, N, K] tma [1, 256, 64] swizzle 128B
out C: bf16[BATCH, M, N]

grid tiles[b = BATCH, m = M / 128, n = N / 256] persistent

smem a_s: bf16[128, 64] stages 3 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 3 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 3 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.b, t.m * 128 :+ 128, kb * 64 :+ 64], ab)
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
        store(C[t.b, t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
