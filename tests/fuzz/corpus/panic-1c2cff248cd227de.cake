# Warp-specialized persistent bf16 GEMM for Hopper: C = A · Bᵀ (both operands K-major).
# One producer warpgroup streams 128×64 tiles of A and 256×64 tiles of B through a
# 4-stage TMA pipeline; two consumer warpgroups each own 64 rows of the 128×256 tile and keep
# one wgmma group in flight while the next stage is consumed. Tiles are walked in bands of 16
# along m so that the blocks running at the same time share A and B tiles in L2.
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [4611686018427387904, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent group 16

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024

# The producer gives registers back so the consumers can hold 64×256 fp32 accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        # The first k-step has no earlier group to retire.
        wait(ab)
        wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
        wgmma_commit()
        # Keep one wgmma group in flight: retire the previous k-step's group, then hand its stage back.
        for kb in 1..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(1)
            release(ab)
        }
        wgmma_wait(0)
        release(ab)
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
