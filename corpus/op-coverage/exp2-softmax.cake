# exp2: row softmax in base 2 (exp(x) = exp2(x · log2 e)), from softmax/sm_90a-bf16-c4096-w4x2.
# Covers `exp2` (MUFU.EX2 without the range reduction of expf).
# Rows of C = 4096 are read in 1 chunk(s) of 4096: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 4 warps per block, each
# owning 2 consecutive row(s) of a 8-row block tile; the reductions are warp shuffles.
kernel softmax_bf16_sm_90a_c4096_w4x2 target sm_90a

dim R multiple_of 8
const C = 4096

in X: bf16[R, C]
out Y: bf16[R, C]

grid tiles[r = R / 8]

role rows: warp 0..4

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 4096 {
                let x = cast(X[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp2((m - m_new) * 1.4426950408889634) + reduce_sum(exp2((x - m_new) * 1.4426950408889634), axis=0)
                m = m_new
            }
            for c in 0..C / 4096 {
                let x = cast(X[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096], f32)
                store(Y[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096], cast(exp2((x - m) * 1.4426950408889634) / s, bf16))
            }
        }
    }
}
