# Row softmax on sm_100a: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), bf16 in and out, f32 math.
# Rows of C = 8192 are read in 8 chunk(s) of 1024: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 8 warps per block, each
# owning 2 consecutive row(s) of a 16-row block tile; the reductions are warp shuffles.
kernel softmax_bf16_sm_100a_c8192_ch1024_w8x2 target sm_100a

dim R multiple_of 16
const C = 8192

in X: bf16[R, C]
out Y: bf16[R, C]

grid tiles[r = R / 16]

role rows: warp 0..8

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 1024 {
                let x = cast(X[t.r * 16 + rows.warp * 2 + i, c * 1024 :+ 1024], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 1024 / 2 {
                let x = cast(X[t.r * 16 + rows.warp * 2 + i, c * 1024 :+ 1024], f32)
                store(Y[t.r * 16 + rows.warp * 2 + i, c * 1024 :+ 1024], cast(exp(x - m) / s, bf16))
            }
        }
    }
}
