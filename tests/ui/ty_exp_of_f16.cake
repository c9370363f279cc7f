# expect: type error: `exp` of the f16 row `x` (it is not cast to f32 first)
# Fused elementwise graph on sm_89: Z = softplus(x) · y, softplus(x) = log(1 + exp(x)), one kernel instead of 4 memory-bound passes.
# X and Y are f16[R, 4096]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 4 warps processes 2 row(s) of a 8-row tile per step, reading each input once.
kernel ew_softplus_mul_f16_sm_89_c4096 target sm_89

dim R multiple_of 8
const C = 4096

in X: f16[R, C]
in Y: f16[R, C]
in W: f32[C]
out Z: f16[R, C]

grid tiles[r = R / 8]

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..2 {
            let x = X[t.r * 8 + rows.warp * 2 + i, :]
            let y = cast(Y[t.r * 8 + rows.warp * 2 + i, :], f32)
            store(Z[t.r * 8 + rows.warp * 2 + i, :], cast(log(1.0 + exp(x)) * y, f16))
        }
    }
}
