# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: rmsnorm/sm_90a-bf16-c8192-w8x1
# edit: line 31 (line 25 of the base case)
#   before: let x = cast(X[t.r * 8 + rows.warp * 1 + i, :], f32)
#   after:  let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
# class: index: the input row uses a warp stride of 2 for 1-row warps: each warp normalizes another warp's row
# RMSNorm on sm_90a: Y[r, :] = X[r, :] · rsqrt(mean(X[r, :]²) + eps) · W, bf16 in and out, f32 math,
# C = 8192. 8 warps per block, each normalizing 1 row(s) of a 8-row tile (256 values
# per lane): the sum of squares is a warp-split reduction, then the normalized row is written. `x`
# names the row window, so the lowering reads X once per pass (twice in all; the second read mostly
# hits L2) and W once per row.
kernel rmsnorm_bf16_sm_90a_c8192_w8x1 target sm_90a

dim R multiple_of 8
const C = 8192

scalar eps: f32

in X: bf16[R, C]
in W: f32[C]
out Y: bf16[R, C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..1 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            let ms = reduce_sum(x * x, axis=0) / C
            store(Y[t.r * 8 + rows.warp * 1 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
        }
    }
}
