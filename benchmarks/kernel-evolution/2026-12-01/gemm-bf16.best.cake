# bf16 GEMM for Hopper, the naive seed of kernel evolution (contracts/gemm-bf16.toml): C = A · Bᵀ,
# both operands K-major. One producer warpgroup streams A and B tiles through a two-stage TMA
# pipeline; one consumer warpgroup waits for every k-step's wgmma before releasing its stage; one
# block per tile. A consumer warpgroup owns 64 rows of the tile, so with one consumer the tile is
# 64×128 (a one-consumer 128×128 tile is not expressible: wgmma's M is 64 per warpgroup).
# Derived from corpus/gemm-sm90-ws's template; the tile shape, consumer count and register budget
# are consts for the parameter tactics.
kernel gemm_bf16 target sm_90a

# Consumer warpgroups; each owns 64 rows of the tile.
const WG = 2
const TM = 64 * WG
const TN = 256
const BK = 64
# Registers per consumer thread (setmaxnreg).
const MMA_REGS = 232

dim M multiple_of TM
dim N multiple_of TN
dim K multiple_of BK

in A: bf16[M, K] tma [TM, BK] swizzle 128B
in B: bf16[N, K] tma [TN, BK] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / TM, n = N / TN] persistent group 16

smem a_s: bf16[TM, BK] stages 4 swizzle 128B align 1024
smem b_s: bf16[TN, BK] stages 4 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..1 + WG regs MMA_REGS

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / BK {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * TM :+ TM, kb * BK :+ BK], ab)
            tma_load(b_s[ab.stage], B[t.n * TN :+ TN, kb * BK :+ BK], ab)
        }
    }
}

on mma {
    reg acc: f32[64, TN] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / BK {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * TM + mma.warpgroup * 64 :+ 64, t.n * TN :+ TN], cast(acc, bf16))
    }
}
