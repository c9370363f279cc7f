# Tensor-core throughput, wgmma m64n256k16 bf16 → f32 (calibration/microbench/sm_90a/README.md, bench `wgmma`).
# Each block loads its 128×64 A tile and 256×64 B tile into shared memory once per output tile, then its
# two consumer warpgroups run K / 64 wgmma groups (4 × m64n256k16 each) over the same resident stage,
# keeping one group in flight (wgmma_wait(1)), like a GEMM main loop without the loads. Global memory is
# touched once per tile, so the tensor cores are the bottleneck on the GPU and in the cost model.
kernel wgmma_n256 target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, 64] tma [128, 64] swizzle 128B
in B: bf16[N, 64] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent

smem a_s: bf16[128, 64] stages 2 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 2 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 2 producer load consumer mma

on load {
    for t in tiles {
        acquire(ab)
        tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, 0 :+ 64], ab)
        tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, 0 :+ 64], ab)
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        wait(ab)
        wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
        wgmma_commit()
        for kb in 1..K / 64 {
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(1)
        }
        wgmma_wait(0)
        release(ab)
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
