# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: rmsnorm/sm_90a-f32-c1024-w4x8
# edit: line 14 (line 8 of the base case)
#   before: dim R multiple_of 32
#   after:  dim R multiple_of 16
# class: divisibility: R multiple_of 16 with 32-row tiles: R = 4272 leaves 16 rows unwritten
# RMSNorm on sm_90a: Y[r, :] = X[r, :] · rsqrt(mean(X[r, :]²) + eps) · W, f32 in and out, f32 math,
# C = 1024. 4 warps per block, each normalizing 8 row(s) of a 32-row tile (32 values
# per lane): the sum of squares is a warp-split reduction, then the normalized row is written. `x`
# names the row window, so the lowering reads X once per pass (twice in all; the second read mostly
# hits L2) and W once per row.
kernel rmsnorm_f32_sm_90a_c1024_w4x8 target sm_90a

dim R multiple_of 16
const C = 1024

scalar eps: f32

in X: f32[R, C]
in W: f32[C]
out Y: f32[R, C]

grid tiles[r = R / 32]

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..8 {
            let x = X[t.r * 32 + rows.warp * 8 + i, :]
            let ms = reduce_sum(x * x, axis=0) / C
            store(Y[t.r * 32 + rows.warp * 8 + i, :], x * rsqrt(ms + eps) * w)
        }
    }
}
