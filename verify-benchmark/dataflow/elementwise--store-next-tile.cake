# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: elementwise/clamp-mix-sm_90a-f16-c1024
# edit: line 30 (line 24 of the base case)
#   before: store(Z[t.r * 32 + rows.warp * 8 + i, :], cast(min(max(x, 0.0 - w), w) + 0.5 * y, f16))
#   after:  store(Z[(t.r + 1) * 32 + rows.warp * 8 + i, :], cast(min(max(x, 0.0 - w), w) + 0.5 * y, f16))
# class: index: the output is stored at the next tile: tile 0 never written, the last tile past the end
# Fused elementwise graph on sm_90a: Z = clamp(x, −W, W) + 0.5 · y, one kernel instead of 4 memory-bound passes.
# X and Y are f16[R, 1024]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 4 warps processes 8 row(s) of a 32-row tile per step, reading each input once.
kernel ew_clamp_mix_f16_sm_90a_c1024 target sm_90a

dim R multiple_of 32
const C = 1024

in X: f16[R, C]
in Y: f16[R, C]
in W: f32[C]
out Z: f16[R, C]

grid tiles[r = R / 32] persistent

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..8 {
            let x = cast(X[t.r * 32 + rows.warp * 8 + i, :], f32)
            let y = cast(Y[t.r * 32 + rows.warp * 8 + i, :], f32)
            store(Z[(t.r + 1) * 32 + rows.warp * 8 + i, :], cast(min(max(x, 0.0 - w), w) + 0.5 * y, f16))
        }
    }
}
