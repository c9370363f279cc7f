# seeded failure benchmark, class tma-box-range (heldout; ablates V211): one edit
# base: rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16
# edit: line(s) 19 (line(s) 13 of the base case)
#   before: in X: bf16[R, C]
#   after:  in X: bf16[R, C] tma [16, 4096]
# the input declares a box of whole 4096-column rows
# RMSNorm on sm_90a: Y[r, :] = X[r, :] · rsqrt(mean(X[r, :]²) + eps) · W, bf16 in and out, f32 math,
# C = 4096. 8 warps per block, each normalizing 2 row(s) of a 16-row tile (128 values
# per lane): the sum of squares is a warp-split reduction, then the normalized row is written. `x`
# names the row window, so the lowering reads X once per pass (twice in all; the second read mostly
# hits L2) and W once per row.
kernel rmsnorm_bf16_sm_90a_c4096_w8x2_wbf16 target sm_90a

dim R multiple_of 16
const C = 4096

scalar eps: f32

in X: bf16[R, C] tma [16, 4096]
in W: bf16[C]
out Y: bf16[R, C]

grid tiles[r = R / 16]

role rows: warp 0..8

on rows {
    let w = cast(W[:], f32)
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 16 + rows.warp * 2 + i, :], f32)
            let ms = reduce_sum(x * x, axis=0) / C
            store(Y[t.r * 16 + rows.warp * 2 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
        }
    }
}
