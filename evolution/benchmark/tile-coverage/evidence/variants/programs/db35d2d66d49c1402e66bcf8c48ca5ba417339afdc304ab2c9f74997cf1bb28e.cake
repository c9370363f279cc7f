# seeded failure benchmark, class tile-coverage (train; ablates V320, V321, V323): one edit
# base: layernorm/sm_90a-f32-c2048-w4x4-p
# edit: line(s) 31 (line(s) 25 of the base case)
#   before: for i in 0..4 {
#   after:  for i in 0..3 {
# each 4-row warp loops over 3 rows: every fourth row is never written
# LayerNorm on sm_90a: Y[r, :] = (X[r, :] − mean) · rsqrt(var + eps) · W + Bias, f32 in and out,
# f32 math, C = 2048, two-pass (centered) variance for accuracy. 4 warps per block, each
# normalizing 4 row(s) of a 16-row tile (64 values per lane). `x` names the row
# window, so the lowering reads X once per pass (mean, variance, output) and W and Bias once per row.
kernel layernorm_f32_sm_90a_c2048_w4x4_p target sm_90a

dim R multiple_of 16
const C = 2049

scalar eps: f32

in X: f32[R, C]
in W: f32[C]
in Bias: f32[C]
out Y: f32[R, C]

grid tiles[r = R / 16] persistent

role rows: warp 0..4

on rows {
    let w = W[:]
    let b = Bias[:]
    for t in tiles {
        for i in 0..3 {
            let x = X[t.r * 16 + rows.warp * 4 + i, :]
            let mu = reduce_sum(x, axis=0) / C
            let xc = x - mu
            let var = reduce_sum(xc * xc, axis=0) / C
            store(Y[t.r * 16 + rows.warp * 4 + i, :], xc * rsqrt(var + eps) * w + b)
        }
    }
}
