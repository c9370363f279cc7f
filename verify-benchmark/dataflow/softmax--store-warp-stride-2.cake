# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: softmax/sm_90a-bf16-c1024-w8x4
# edit: line 39 (line 33 of the base case)
#   before: store(Y[t.r * 32 + rows.warp * 4 + i, c * 1024 :+ 1024], cast(exp(x - m) / s, bf16))
#   after:  store(Y[t.r * 32 + rows.warp * 2 + i, c * 1024 :+ 1024], cast(exp(x - m) / s, bf16))
# class: coverage: the store uses a warp stride of 2 rows for 4-row warps: rows written twice and rows never written
# Row softmax on sm_90a: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), bf16 in and out, f32 math.
# Rows of C = 1024 are read in 1 chunk(s) of 1024: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 8 warps per block, each
# owning 4 consecutive row(s) of a 32-row block tile; the reductions are warp shuffles.
kernel softmax_bf16_sm_90a_c1024_w8x4 target sm_90a

dim R multiple_of 32
const C = 1024

in X: bf16[R, C]
out Y: bf16[R, C]

grid tiles[r = R / 32]

role rows: warp 0..8

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..4 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 1024 {
                let x = cast(X[t.r * 32 + rows.warp * 4 + i, c * 1024 :+ 1024], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 1024 {
                let x = cast(X[t.r * 32 + rows.warp * 4 + i, c * 1024 :+ 1024], f32)
                store(Y[t.r * 32 + rows.warp * 2 + i, c * 1024 :+ 1024], cast(exp(x - m) / s, bf16))
            }
        }
    }
}
