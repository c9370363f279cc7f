# V954 (coverage limit): a sliding-window attention whose producer starts its key loop one tile later
# (max(t.q * 2 - 15, 0)) than its consumers (max(t.q * 2 - 16, 0)). Two different clamps may still agree,
# so the difference is no verdict; the sample bindings are shorter than the window, where they agree.
# A coverage limit, never a silent pass (a binding with S past the window would be V104).
kernel attn_causal_bf16_hd128_q128_s2_w1024 target sm_90a

dim BH
dim S multiple_of 128
const HD = 128

scalar scale: f32

in Q: bf16[BH, S, HD] tma [1, 128, 64] swizzle 128B
in K: bf16[BH, S, HD] tma [1, 64, 64] swizzle 128B
in VT: bf16[BH, HD, S] tma [1, 128, 64] swizzle 128B
out O: bf16[BH, S, HD]

grid tiles[b = BH, q = S / 128]

smem q_s: bf16[2, 128, 64] swizzle 128B align 1024
smem k_s: bf16[2, 64, 64] stages 2 swizzle 128B align 1024
smem v_s: bf16[128, 64] stages 2 swizzle 128B align 1024
smem p_s: bf16[2, 64, 64] swizzle 128B align 1024
smem m_s: f32[2, 64, 1]
smem c_s: f32[2, 64, 1]

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline qp: stages 1 producer load consumer mma
pipeline kv: stages 2 producer load consumer mma

on load {
    for t in tiles {
        acquire(qp)
        for dc in 0..HD / 64 {
            tma_load(q_s[dc], Q[t.b, t.q * 128 :+ 128, dc * 64 :+ 64], qp)
        }
        for j in max(t.q * 2 - 15, 0)..(t.q + 1) * 2 {
            acquire(kv)
            for dc in 0..HD / 64 {
                tma_load(k_s[kv.stage, dc], K[t.b, j * 64 :+ 64, dc * 64 :+ 64], kv)
            }
            tma_load(v_s[kv.stage], VT[t.b, 0 :+ 128, j * 64 :+ 64], kv)
        }
    }
}

on mma {
    reg s: f32[64, 64] per warpgroup
    reg o: f32[64, 128] per warpgroup
    reg m: f32[64] per warpgroup
    reg l: f32[64] per warpgroup
    for t in tiles {
        wait(qp)
        zero(o)
        fill(m, -inf)
        fill(l, 0.0)
        for j in max(t.q * 2 - 16, 0)..(t.q + 1) * 2 {
            wait(kv)
            zero(s)
            for dc in 0..HD / 64 {
                wgmma(s, q_s[dc, mma.warpgroup * 64 :+ 64], k_s[kv.stage, dc])
            }
            wgmma_commit()
            wgmma_wait(0)
            if j >= t.q * 2 || j < (t.q + 1) * 2 - 16 {
                s = select(j * 64 + iota(s, axis=1) <= t.q * 128 + mma.warpgroup * 64 + iota(s, axis=0) && j * 64 + iota(s, axis=1) > t.q * 128 + mma.warpgroup * 64 + iota(s, axis=0) - 1024, s, -inf)
            }
            let m_new = max(m, reduce_max(s, axis=1) * scale)
            store(m_s[mma.warpgroup, :, 0], m_new)
            store(c_s[mma.warpgroup, :, 0], exp(m - m_new))
            sync_role(mma)
            let p = exp(s * scale - m_s[mma.warpgroup])
            l = l * exp(m - m_new) + reduce_sum(p, axis=1)
            m = m_new
            o = o * c_s[mma.warpgroup]
            store(p_s[mma.warpgroup], cast(p, bf16))
            fence_proxy_async()
            sync_role(mma)
            wgmma(o, p_s[mma.warpgroup], v_s[kv.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(kv)
        }
        release(qp)
        store(m_s[mma.warpgroup, :, 0], l)
        sync_role(mma)
        store(O[t.b, t.q * 128 + mma.warpgroup * 64 :+ 64, :], cast(o / m_s[mma.warpgroup], bf16))
    }
}
