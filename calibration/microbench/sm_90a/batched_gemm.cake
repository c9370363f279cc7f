# Batched tile-space probe (README.md, `[[unfitted]]` entry `batched-tiles`): the corpus
# gemm-batched kernel bf16-128x128-s4 (3-D TMA boxes [1, 128, 64], one (b, m, n) tile per block) as
# it is. With M = N = 128 every batch entry is one tile that shares no operand with any other, so
# each block streams its own A and B from DRAM; `fill_gemm.cake` at the same tile count and K
# (entry `batched-tiles-2d`) reads each A row block and B column block 11–12 times from L2.
kernel probe_batched_gemm target sm_90a

dim BATCH
dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[BATCH, M, K] tma [1, 128, 64] swizzle 128B
in B: bf16[BATCH, N, K] tma [1, 128, 64] swizzle 128B
out C: bf16[BATCH, M, N]

grid tiles[b = BATCH, m = M / 128, n = N / 128]

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[128, 64] stages 4 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.b, t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.b, t.n * 128 :+ 128, kb * 64 :+ 64], ab)
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
        store(C[t.b, t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 128 :+ 128], cast(acc, bf16))
    }
}
