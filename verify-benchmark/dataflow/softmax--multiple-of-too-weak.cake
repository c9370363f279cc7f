# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: softmax/sm_90a-bf16-c4096-w4x2
# edit: line 14 (line 8 of the base case)
#   before: dim R multiple_of 8
#   after:  dim R multiple_of 4
# class: divisibility: R multiple_of 4 with 8-row tiles: the last 4 rows of R = 452 are never written
# Row softmax on sm_90a: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), bf16 in and out, f32 math.
# Rows of C = 4096 are read in 1 chunk(s) of 4096: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 4 warps per block, each
# owning 2 consecutive row(s) of a 8-row block tile; the reductions are warp shuffles.
kernel softmax_bf16_sm_90a_c4096_w4x2 target sm_90a

dim R multiple_of 4
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
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 4096 {
                let x = cast(X[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096], f32)
                store(Y[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096], cast(exp(x - m) / s, bf16))
            }
        }
    }
}
