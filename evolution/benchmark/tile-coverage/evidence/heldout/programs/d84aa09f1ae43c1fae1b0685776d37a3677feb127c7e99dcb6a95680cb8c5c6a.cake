# seeded failure benchmark, class tile-coverage (heldout; ablates V320, V321, V323): one edit
# base: softmax/sm_90a-f16-c2048-w8x2
# edit: line(s) 28 (line(s) 22 of the base case)
#   before: for i in 0..2 {
#   after:  for i in 0..3 {
# each 2-row warp loops over 3 rows: warps write each other's rows
# Row softmax on sm_90a: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), f16 in and out, f32 math.
# Rows of C = 2048 are read in 1 chunk(s) of 2048: a first pass keeps the online running max and
# rescaled sum (the lowering reads each chunk twice there, once per reduction), a second pass
# writes the normalized chunk. 8 warps per block, each
# owning 2 consecutive row(s) of a 16-row block tile; the reductions are warp shuffles.
kernel softmax_f16_sm_90a_c2048_w8x2 target sm_90a

dim R multiple_of 16
const C = 2048

in X: f16[R, C]
out Y: f16[R, C]

grid tiles[r = R / 16]

role rows: warp 0..8

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..3 {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 2048 {
                let x = cast(X[t.r * 16 + rows.warp * 2 + i, c * 2048 :+ 2048], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 2048 {
                let x = cast(X[t.r * 16 + rows.warp * 2 + i, c * 2048 :+ 2048], f32)
                store(Y[t.r * 16 + rows.warp * 2 + i, c * 2048 :+ 2048], cast(exp(x - m) / s, f16))
            }
        }
    }
}
