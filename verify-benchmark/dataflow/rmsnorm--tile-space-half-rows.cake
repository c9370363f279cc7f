# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: rmsnorm/sm_90a-f16-c2048-w8x4-p
# edit: line 23 (line 17 of the base case)
#   before: grid tiles[r = R / 32] persistent
#   after:  grid tiles[r = R / 64] persistent
# class: coverage: a persistent tile space of R/64 for 32-row tiles
# RMSNorm on sm_90a: Y[r, :] = X[r, :] · rsqrt(mean(X[r, :]²) + eps) · W, f16 in and out, f32 math,
# C = 2048. 8 warps per block, each normalizing 4 row(s) of a 32-row tile (64 values
# per lane): the sum of squares is a warp-split reduction, then the normalized row is written. `x`
# names the row window, so the lowering reads X once per pass (twice in all; the second read mostly
# hits L2) and W once per row.
kernel rmsnorm_f16_sm_90a_c2048_w8x4_p target sm_90a

dim R multiple_of 32
const C = 2048

scalar eps: f32

in X: f16[R, C]
in W: f32[C]
out Y: f16[R, C]

grid tiles[r = R / 64] persistent

role rows: warp 0..8

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..4 {
            let x = cast(X[t.r * 32 + rows.warp * 4 + i, :], f32)
            let ms = reduce_sum(x * x, axis=0) / C
            store(Y[t.r * 32 + rows.warp * 4 + i, :], cast(x * rsqrt(ms + eps) * w, f16))
        }
    }
}
