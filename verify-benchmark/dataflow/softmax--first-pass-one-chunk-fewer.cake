# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: softmax/sm_90a-f32-c16384-w8x1-ch2048
# edit: line 31 (line 25 of the base case)
#   before: for c in 0..C / 2048 {
#   after:  for c in 0..C / 2048 - 1 {
# class: pass-chunk: the max/sum pass skips the last chunk that the second pass normalizes
# Row softmax on sm_90a: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), f32 in and out, f32 math.
# Rows of C = 16384 are read in 8 chunk(s) of 2048: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 8 warps per block, each
# owning 1 consecutive row(s) of a 8-row block tile; the reductions are warp shuffles.
kernel softmax_f32_sm_90a_c16384_ch2048_w8x1 target sm_90a

dim R multiple_of 8
const C = 16384

in X: f32[R, C]
out Y: f32[R, C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..1 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 2048 - 1 {
                let x = X[t.r * 8 + rows.warp * 1 + i, c * 2048 :+ 2048]
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 2048 {
                let x = X[t.r * 8 + rows.warp * 1 + i, c * 2048 :+ 2048]
                store(Y[t.r * 8 + rows.warp * 1 + i, c * 2048 :+ 2048], exp(x - m) / s)
            }
        }
    }
}
