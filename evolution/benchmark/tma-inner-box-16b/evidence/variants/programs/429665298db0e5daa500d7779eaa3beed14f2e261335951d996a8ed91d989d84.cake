# seeded failure benchmark, class tma-inner-box-16b (train; ablates V212): one edit
# base: layernorm/sm_90a-bf16-c8192-w8x1
# edit: line(s) 20 (line(s) 14 of the base case)
#   before: in Bias: f32[C]
#   after:  in Bias: f32[C] tma [6]
# the bias vector's box is 6 f32: 24 B
# LayerNorm on sm_90a: Y[r, :] = (X[r, :] − mean) · rsqrt(var + eps) · W + Bias, bf16 in and out,
# f32 math, C = 8192, two-pass (centered) variance for accuracy. 8 warps per block, each
# normalizing 1 row(s) of a 8-row tile (256 values per lane). `x` names the row
# window, so the lowering reads X once per pass (mean, variance, output) and W and Bias once per row.
kernel layernorm_bf16_sm_90a_c8192_w8x1 target sm_90a

dim R multiple_of 8
const C = 8192

scalar eps: f32

in X: bf16[R, C]
in W: f32[C]
in Bias: f32[C] tma [12]
out Y: bf16[R, C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    let w = W[:]
    let b = Bias[:]
    for t in tiles {
        for i in 0..1 {
            let x = cast(X[t.r * 8 + rows.warp * 1 + i, :], f32)
            let mu = reduce_sum(x, axis=0) / C
            let xc = x - mu
            let var = reduce_sum(xc * xc, axis=0) / C
            store(Y[t.r * 8 + rows.warp * 1 + i, :], cast(xc * rsqrt(var + eps) * w + b, bf16))
        }
    }
}
