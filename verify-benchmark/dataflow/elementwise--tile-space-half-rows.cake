# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: elementwise/geglu-sm_90a-f16-c2048
# edit: line 20 (line 14 of the base case)
#   before: grid tiles[r = R / 16]
#   after:  grid tiles[r = R / 32]
# class: coverage: a tile space of R/32 for 16-row tiles
# Fused elementwise graph on sm_90a: Z = gelu(x) · y with the sigmoid approximation gelu(x) ≈ x · σ(1.702x), one kernel instead of 5 memory-bound passes.
# X and Y are f16[R, 2048]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 8 warps processes 2 row(s) of a 16-row tile per step, reading each input once.
kernel ew_geglu_f16_sm_90a_c2048 target sm_90a

dim R multiple_of 16
const C = 2048

in X: f16[R, C]
in Y: f16[R, C]
in W: f32[C]
out Z: f16[R, C]

grid tiles[r = R / 32]

role rows: warp 0..8

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 16 + rows.warp * 2 + i, :], f32)
            let y = cast(Y[t.r * 16 + rows.warp * 2 + i, :], f32)
            store(Z[t.r * 16 + rows.warp * 2 + i, :], cast(x / (1.0 + exp(-1.702 * x)) * y, f16))
        }
    }
}
