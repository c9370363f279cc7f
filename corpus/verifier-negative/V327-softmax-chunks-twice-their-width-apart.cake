# Row softmax on sm_120a: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), f16 in and out, f32 math.
# Rows of C = 1024 are read in 2 chunk(s) of 512: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 4 warps per block, each
# owning 4 consecutive row(s) of a 16-row block tile; the reductions are warp shuffles.
kernel softmax_f16_sm_120a_c1024_ch512_w4x4 target sm_120a

dim R multiple_of 16
const C = 1024

in X: f16[R, C]
out Y: f16[R, C]

grid tiles[r = R / 16]

role rows: warp 0..4

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..4 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 512 {
                let x = cast(X[t.r * 16 + rows.warp * 4 + i, c * 1024 :+ 512], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 512 {
                let x = cast(X[t.r * 16 + rows.warp * 4 + i, c * 1024 :+ 512], f32)
                store(Y[t.r * 16 + rows.warp * 4 + i, c * 512 :+ 512], cast(exp(x - m) / s, f16))
            }
        }
    }
}
