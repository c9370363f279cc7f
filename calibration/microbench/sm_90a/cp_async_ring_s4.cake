# Probe `cp-async-ring` (calibration/microbench/sm_90a/README.md): gemm-sm80's 4-stage cp.async pipeline
# (the corpus case gemm-sm80/sm_90a-bf16-128x128-s4's loop: four warps load 128×32 A and B tiles per
# k step, wait for the oldest group, block barrier) with its ldmatrix and mma.sync left out, so the
# time is the pipeline's own: a stage's round trip (issue, DRAM or L2, wait, barrier) over the
# stages in flight. Against mma-sync (the same tiles resident) it says where gemm-sm80's time goes.
kernel cp_async_ring_s4 target sm_90a

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 32

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] stages 4 swizzle 64B
smem b_s: bf16[128, 32] stages 4 swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[64, 64] per warp
    reg a_f: bf16[64, 16] per warp
    reg b_f: bf16[64, 16] per warp
    for t in tiles {
        zero(acc)
        for s in 0..3 {
            cp_async(a_s[s], A[t.m * 128 :+ 128, s * 32 :+ 32])
            cp_async(b_s[s], B[t.n * 128 :+ 128, s * 32 :+ 32])
            cp_async_commit()
        }
        for kb in 0..K / 32 {
            cp_async_wait(2)
            sync()
            if kb + 3 < K / 32 {
                cp_async(a_s[(kb + 3) % 4], A[t.m * 128 :+ 128, (kb + 3) * 32 :+ 32])
                cp_async(b_s[(kb + 3) % 4], B[t.n * 128 :+ 128, (kb + 3) * 32 :+ 32])
            }
            cp_async_commit()
            # One ldmatrix of each operand per k step (the kernel has two, and an mma.sync after
            # each pair): the stage is read, so nothing of the loop is dead.
            ldmatrix(a_f, a_s[kb % 4, all.warp / 2 * 64 :+ 64, 0 :+ 16])
            ldmatrix(b_f, b_s[kb % 4, all.warp % 2 * 64 :+ 64, 0 :+ 16])
        }
        sync()
        store(C[t.m * 128 + all.warp / 2 * 64 :+ 64, t.n * 128 + all.warp % 2 * 64 :+ 64], cast(acc, bf16))
    }
}
