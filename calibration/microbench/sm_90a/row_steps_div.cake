# Row-step probe, division (README.md, `[[unfitted]]` entry `row-steps`): `row_steps_mul.cake` with
# `x / y` for `x * y`, an IEEE f32 divide per element (a multi-instruction sequence with a slow
# path), so against the multiply the difference is what the division costs on a warp's path at
# 4 warps per SM.
kernel probe_row_steps_div target sm_90a

dim R multiple_of 8
const C = 4096

in X: bf16[R, C]
in Y: bf16[R, C]
out Z: bf16[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            let y = cast(Y[t.r * 8 + rows.warp * 2 + i, :], f32)
            store(Z[t.r * 8 + rows.warp * 2 + i, :], cast(x / y, bf16))
        }
    }
}
