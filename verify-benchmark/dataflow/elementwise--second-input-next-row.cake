# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: elementwise/rsqrt-scale-sm_90a-bf16-c512
# edit: line 29 (line 23 of the base case)
#   before: let y = cast(Y[t.r * 32 + rows.warp * 8 + i, :], f32)
#   after:  let y = cast(Y[t.r * 32 + rows.warp * 8 + i + 1, :], f32)
# class: index: the second input is read one row below the row being written
# Fused elementwise graph on sm_90a: Z = x · rsqrt(y² + W) (per-element normalization), one kernel instead of 3 memory-bound passes.
# X and Y are bf16[R, 512]; W is a per-column f32 vector (bias or gain) broadcast over rows. Each of the
# 4 warps processes 8 row(s) of a 32-row tile per step, reading each input once.
kernel ew_rsqrt_scale_bf16_sm_90a_c512 target sm_90a

dim R multiple_of 32
const C = 512

in X: bf16[R, C]
in Y: bf16[R, C]
in W: f32[C]
out Z: bf16[R, C]

grid tiles[r = R / 32]

role rows: warp 0..4

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..8 {
            let x = cast(X[t.r * 32 + rows.warp * 8 + i, :], f32)
            let y = cast(Y[t.r * 32 + rows.warp * 8 + i + 1, :], f32)
            store(Z[t.r * 32 + rows.warp * 8 + i, :], cast(x * rsqrt(y * y + w), bf16))
        }
    }
}
