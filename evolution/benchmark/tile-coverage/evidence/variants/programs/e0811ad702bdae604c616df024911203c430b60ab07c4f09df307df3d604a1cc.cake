# seeded failure benchmark, class tile-coverage (train; ablates V320, V321, V323): one edit
# base: elementwise/swiglu-sm_90a-bf16-c4096
# edit: line(s) 27 (line(s) 21 of the base case)
#   before: for i in 0..2 {
#   after:  for i in 0..4 {
# each 2-row warp loops over 4 rows: warps write each other's rows and the next tile's
# Fused elementwise graph on sm_90a: Z = silu(x) · y (SwiGLU), silu(x) = x / (1 + exp(−x)), one kernel instead of 4 memory-bound passes.
# X and Y are bf16[R, 4096]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 4 warps processes 2 row(s) of a 8-row tile per step, reading each input once.
kernel ew_swiglu_bf16_sm_90a_c4096 target sm_90a

dim R multiple_of 8
const C = 4088

in X: bf16[R, C]
in Y: bf16[R, C]
in W: f32[C]
out Z: bf16[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..4 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            let y = cast(Y[t.r * 8 + rows.warp * 2 + i, :], f32)
            store(Z[t.r * 8 + rows.warp * 2 + i, :], cast(x / (1.0 + exp(0.0 - x)) * y, bf16))
        }
    }
}
