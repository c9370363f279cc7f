# Row softmax on sm_80: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), f16 in and out, f32 math.
# Rows of C = 8192 are read in 4 chunk(s) of 2048: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 4 warps per block, each
# owning 1 consecutive row(s) of a 4-row block tile; the reductions are warp shuffles.
kernel softmax_f16_sm_80_c8192_ch2048_w4x1 target sm_80

dim R multiple_of 4
const C = 8192

in X: f16[R, C]
out Y: f16[R, C]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..1 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 2048 + 1 {
                let x = cast(X[t.r * 4 + rows.warp * 1 + i, c * 2048 :+ 2048], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 2048 {
                let x = cast(X[t.r * 4 + rows.warp * 1 + i, c * 2048 :+ 2048], f32)
                store(Y[t.r * 4 + rows.warp * 1 + i, c * 2048 :+ 2048], cast(exp(x - m) / s, f16))
            }
        }
    }
}
