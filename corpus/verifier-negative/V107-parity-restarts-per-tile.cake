# V107 (phase-desync, bug classes 1/6): in a persistent kernel the producer derives its `empty` parity from `kb`, which restarts every tile; with an odd number of k-blocks per slot and tile, the second tile waits with the wrong parity.
# Based on examples/gemm_bf16_ws.cake rewritten with explicit mbarriers (a 2-slot ring, persistent)
# Hopper bf16 GEMM with explicit mbarriers instead of a pipeline: a 2-slot ring of A/B tiles,
# a full barrier per slot (TMA bytes) and an empty barrier per slot (consumer release).
kernel gemm_explicit target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent

smem a_s: bf16[2, 128, 64] swizzle 128B align 1024
smem b_s: bf16[2, 256, 64] swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

barrier full: stages 2 count 1 producer load consumer mma
barrier empty: stages 2 count 1 producer mma consumer load

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            wait_parity(empty[kb % 2], (kb / 2 + 1) % 2)
            arrive_expect_tx(full[kb % 2], 49152)
            tma_load(a_s[kb % 2], A[t.m * 128 :+ 128, kb * 64 :+ 64], full[kb % 2])
            tma_load(b_s[kb % 2], B[t.n * 256 :+ 256, kb * 64 :+ 64], full[kb % 2])
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(full[kb % 2])
            wgmma(acc, a_s[kb % 2, mma.warpgroup * 64 :+ 64], b_s[kb % 2])
            wgmma_commit()
            wgmma_wait(0)
            arrive(empty[kb % 2])
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
