# V321 (elementwise-warps-overlap): warp w stores rows 3w..3w+4 of its 16-row tile: neighbouring warps overlap by a row.
# Based on corpus case elementwise/bias-relu-res-sm_80-bf16-c1024 with this change.
# Fused elementwise graph on sm_80: Z = relu(x + W) + y (bias, ReLU, residual), one kernel instead of 3 memory-bound passes.
# X and Y are bf16[R, 1024]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 4 warps processes 4 row(s) of a 16-row tile per step, reading each input once.
kernel ew_bias_relu_res_bf16_sm_80_c1024 target sm_80

dim R multiple_of 16
const C = 1024

in X: bf16[R, C]
in Y: bf16[R, C]
in W: f32[C]
out Z: bf16[R, C]

grid tiles[r = R / 16]

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..4 {
            let x = cast(X[t.r * 16 + rows.warp * 4 + i, :], f32)
            let y = cast(Y[t.r * 16 + rows.warp * 4 + i, :], f32)
            store(Z[t.r * 16 + rows.warp * 3 + i, :], cast(max(x + w, 0.0) + y, bf16))
        }
    }
}
