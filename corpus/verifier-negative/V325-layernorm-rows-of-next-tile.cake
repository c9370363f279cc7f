# LayerNorm on sm_90a: Y[r, :] = (X[r, :] − mean) · rsqrt(var + eps) · W + Bias, f16 in and out,
# f32 math, C = 1024, two-pass (centered) variance for accuracy. 8 warps per block, each
# normalizing 4 row(s) of a 32-row tile (32 values per lane). `x` names the row
# window, so the lowering reads X once per pass (mean, variance, output) and W and Bias once per row.
kernel layernorm_f16_sm_90a_c1024_w8x4 target sm_90a

dim R multiple_of 32
const C = 1024

scalar eps: f32

in X: f16[R, C]
in W: f32[C]
in Bias: f32[C]
out Y: f16[R, C]

grid tiles[r = R / 32]

role rows: warp 0..8

on rows {
    let w = W[:]
    let b = Bias[:]
    for t in tiles {
        for i in 0..4 {
            let x = cast(X[(t.r + 1) * 32 + rows.warp * 4 + i, :], f32)
            let mu = reduce_sum(x, axis=0) / C
            let xc = x - mu
            let var = reduce_sum(xc * xc, axis=0) / C
            store(Y[t.r * 32 + rows.warp * 4 + i, :], cast(xc * rsqrt(var + eps) * w + b, f16))
        }
    }
}
