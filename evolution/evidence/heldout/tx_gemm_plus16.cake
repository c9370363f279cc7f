# BROKEN ON PURPOSE: evidence for the compiler-evolution engine (evolution/evidence/README.md).
# Held out, bucket `tx`. The producer announces 16 bytes too many. The loads credited to `full` deliver 128·64·2 + 256·64·2 = 49152 bytes per k-step. A hang.
# Today: V101; L001.
kernel tx_gemm_plus16 target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent

smem a_s: bf16[128, 64] swizzle 128B align 1024
smem b_s: bf16[256, 64] swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

# full: the producer arms it (1 arrival + transaction bytes); empty: the consumers hand it back.
barrier full: count 1 producer load consumer mma
barrier empty: count 1 producer mma consumer load

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            arrive_expect_tx(full, 49168)
            tma_load(a_s, A[t.m * 128 :+ 128, kb * 64 :+ 64], full)
            tma_load(b_s, B[t.n * 256 :+ 256, kb * 64 :+ 64], full)
            # One stage: refill it only once the consumers are done with this k-step.
            wait(empty)
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(full)
            wgmma(acc, a_s[mma.warpgroup * 64 :+ 64], b_s)
            wgmma_commit()
            wgmma_wait(0)
            arrive(empty)
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
