# seeded failure benchmark, class tile-coverage (probe; ablates V320, V321, V323): a LEGAL probe just inside the boundary
# base: gemm-sm90-ws/bf16-64x256-s4
# edit: line(s) 14 (line(s) 8 of the base case)
#   before: dim N multiple_of 256
#   after:  dim N multiple_of 512
# N multiple_of 512 with 256-column tiles: a stronger divisor, still exact
# Warp-specialized GEMM for Hopper: C = A · Bᵀ, A bf16 and B bf16 (both K-major),
# f32 accumulators, bf16 output. One producer warpgroup streams 64×64 tiles of A and
# 256×64 tiles of B through a 4-stage TMA pipeline; 1 consumer warpgroup(s) each own
# 64 rows of the 64×256 output tile.
kernel gemm_bf16_ws_64x256_s4 target sm_90a

dim M multiple_of 64
dim N multiple_of 512
dim K multiple_of 64

in A: bf16[M, K] tma [64, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 64, n = N / 256]

smem a_s: bf16[64, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024

# The producer gives registers back to the consumers' 256-wide accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..2 regs 240

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 64 :+ 64, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, kb * 64 :+ 64], ab)
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
        store(C[t.m * 64 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
