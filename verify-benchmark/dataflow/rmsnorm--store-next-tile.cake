# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: rmsnorm/sm_90a-bf16-c4096-w4x2-p
# edit: line 33 (line 27 of the base case)
#   before: store(Y[t.r * 8 + rows.warp * 2 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
#   after:  store(Y[(t.r + 1) * 8 + rows.warp * 2 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
# class: index: the normalized row is stored at the next tile's rows
# RMSNorm on sm_90a: Y[r, :] = X[r, :] · rsqrt(mean(X[r, :]²) + eps) · W, bf16 in and out, f32 math,
# C = 4096. 4 warps per block, each normalizing 2 row(s) of a 8-row tile (128 values
# per lane): the sum of squares is a warp-split reduction, then the normalized row is written. `x`
# names the row window, so the lowering reads X once per pass (twice in all; the second read mostly
# hits L2) and W once per row.
kernel rmsnorm_bf16_sm_90a_c4096_w4x2_p target sm_90a

dim R multiple_of 8
const C = 4096

scalar eps: f32

in X: bf16[R, C]
in W: f32[C]
out Y: bf16[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            let ms = reduce_sum(x * x, axis=0) / C
            store(Y[(t.r + 1) * 8 + rows.warp * 2 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
        }
    }
}
