# seeded failure benchmark, class tma-box-range (train; ablates V211): one edit
# base: elementwise/scale-add-sm_90a-bf16-c8192
# edit: line(s) 15 (line(s) 9 of the base case)
#   before: in X: bf16[R, C]
#   after:  in X: bf16[R, C] tma [8, 8192]
# the input declares a box of whole 8192-column rows
# Fused elementwise graph on sm_90a: Z = W · x + y (per-channel gain, residual add), one kernel instead of 2 memory-bound passes.
# X and Y are bf16[R, 8192]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 8 warps processes 1 row(s) of a 8-row tile per step, reading each input once.
kernel ew_scale_add_bf16_sm_90a_c8192 target sm_90a

dim R multiple_of 8
const C = 8192

in X: bf16[R, C] tma [8192, 8]
in Y: bf16[R, C]
in W: f32[C]
out Z: bf16[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..8

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..1 {
            let x = cast(X[t.r * 8 + rows.warp * 1 + i, :], f32)
            let y = cast(Y[t.r * 8 + rows.warp * 1 + i, :], f32)
            store(Z[t.r * 8 + rows.warp * 1 + i, :], cast(fma(w, x, y), bf16))
        }
    }
}
