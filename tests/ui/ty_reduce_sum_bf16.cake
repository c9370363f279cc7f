# expect: type error: `reduce_sum` of the bf16 row `x` (it is not cast to f32 first)
# LayerNorm on sm_80: Y[r, :] = (X[r, :] − mean) · rsqrt(var + eps) · W + Bias, bf16 in and out,
# f32 math, C = 4096, two-pass (centered) variance for accuracy. 4 warps per block, each
# normalizing 2 row(s) of a 8-row tile (128 values per lane). `x` names the row
# window, so the lowering reads X once per pass (mean, variance, output) and W and Bias once per row.
kernel layernorm_bf16_sm_80_c4096_w4x2 target sm_80

dim R multiple_of 8
const C = 4096

scalar eps: f32

in X: bf16[R, C]
in W: f32[C]
in Bias: f32[C]
out Y: bf16[R, C]

grid tiles[r = R / 8]

role rows: warp 0..4

on rows {
    let w = W[:]
    let b = Bias[:]
    for t in tiles {
        for i in 0..2 {
            let x = X[t.r * 8 + rows.warp * 2 + i, :]
            let mu = reduce_sum(x, axis=0) / C
            let xc = x - mu
            let var = reduce_sum(xc * xc, axis=0) / C
            store(Y[t.r * 8 + rows.warp * 2 + i, :], cast(xc * rsqrt(var + eps) * w + b, bf16))
        }
    }
}
