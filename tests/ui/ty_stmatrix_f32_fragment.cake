# expect: type error: `stmatrix` stores the f32 accumulator `s` directly; stmatrix moves 16-bit elements (cast to bf16 first)
# stmatrix: P = bf16(S) written to shared memory with stmatrix, fenced for the async proxy and
# read by the second wgmma; the correct form of corpus/verifier-negative/V455-missing-proxy-fence.cake.
# An attention-like pair of chained GEMMs (S = Q·Kᵀ, O += bf16(S)·V); the correct program calls fence_proxy_async() after the stmatrix.
# Two chained GEMMs per tile (attention without the softmax): S = Q·Kᵀ, P = bf16(S), O += P·V.
kernel attn_lite target sm_90a

dim M multiple_of 128
dim N multiple_of 64

in Q: bf16[M, 64] tma [128, 64] swizzle 128B
in Kt: bf16[N, 64] tma [64, 64] swizzle 128B
in V: bf16[64, N] tma [64, 64] swizzle 128B
out O: bf16[M, 64]

grid tiles[m = M / 128] persistent

smem q_s: bf16[128, 64] swizzle 128B align 1024
smem k_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem v_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem p_s: bf16[2, 64, 64] swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline qp: stages 1 producer load consumer mma
pipeline kv: stages 2 producer load consumer mma

on load {
    for t in tiles {
        acquire(qp)
        tma_load(q_s, Q[t.m * 128 :+ 128, 0 :+ 64], qp)
        for nb in 0..N / 64 {
            acquire(kv)
            tma_load(k_s[kv.stage], Kt[nb * 64 :+ 64, 0 :+ 64], kv)
            tma_load(v_s[kv.stage], V[0 :+ 64, nb * 64 :+ 64], kv)
        }
    }
}

on mma {
    reg s: f32[64, 64] per warpgroup
    reg o: f32[64, 64] per warpgroup
    for t in tiles {
        wait(qp)
        zero(o)
        for nb in 0..N / 64 {
            wait(kv)
            zero(s)
            wgmma(s, q_s[mma.warpgroup * 64 :+ 64], k_s[kv.stage])
            wgmma_commit()
            wgmma_wait(0)
            stmatrix(p_s[mma.warpgroup], s)
            fence_proxy_async()
            sync_role(mma)
            wgmma(o, p_s[mma.warpgroup], v_s[kv.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(kv)
        }
        release(qp)
        store(O[t.m * 128 + mma.warpgroup * 64 :+ 64, 0 :+ 64], cast(o, bf16))
    }
}
