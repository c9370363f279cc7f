# Launch- and fill-dominated GEMM probe (README.md, bench `small-shape` and `[[unfitted]]` entry
# `batched-tiles-2d`): the corpus gemm-sm90-ws kernel bf16-128x128-s4 (one producer warpgroup, two
# consumer warpgroups, a 4-stage TMA pipeline, one 128×128 tile per block) as it is. At a few
# blocks and short K the time is the launch, the block start, the pipeline's first TMA round trip
# and the epilogue store, with next to no MMA time: the shapes step K (fill vs main loop) and the
# block count (1, 8, 132 blocks) apart.
kernel probe_fill_gemm target sm_90a

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [128, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[128, 64] stages 4 swizzle 128B align 1024

# The producer gives registers back to the consumers' 128-wide accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 128 :+ 128, kb * 64 :+ 64], ab)
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
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 128 :+ 128], cast(acc, bf16))
    }
}
