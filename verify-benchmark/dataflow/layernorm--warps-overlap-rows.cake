# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: layernorm/sm_90a-bf16-c4096-w4x2-p
# edit: line 36 (line 30 of the base case)
#   before: store(Y[t.r * 8 + rows.warp * 2 + i, :], cast(xc * rsqrt(var + eps) * w + b, bf16))
#   after:  store(Y[t.r * 8 + rows.warp + i, :], cast(xc * rsqrt(var + eps) * w + b, bf16))
# class: coverage: the store's warp stride is 1 for 2-row warps: overlapping rows, others unwritten
# LayerNorm on sm_90a: Y[r, :] = (X[r, :] − mean) · rsqrt(var + eps) · W + Bias, bf16 in and out,
# f32 math, C = 4096, two-pass (centered) variance for accuracy. 4 warps per block, each
# normalizing 2 row(s) of a 8-row tile (128 values per lane). `x` names the row
# window, so the lowering reads X once per pass (mean, variance, output) and W and Bias once per row.
kernel layernorm_bf16_sm_90a_c4096_w4x2_p target sm_90a

dim R multiple_of 8
const C = 4096

scalar eps: f32

in X: bf16[R, C]
in W: f32[C]
in Bias: f32[C]
out Y: bf16[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    let w = W[:]
    let b = Bias[:]
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            let mu = reduce_sum(x, axis=0) / C
            let xc = x - mu
            let var = reduce_sum(xc * xc, axis=0) / C
            store(Y[t.r * 8 + rows.warp + i, :], cast(xc * rsqrt(var + eps) * w + b, bf16))
        }
    }
}
