# Row-step probe, 16 warps (README.md, `[[unfitted]]` entry `row-steps`): `row_steps_mul.cake` with
# 16 warps per SM (32 rows per tile), four times the loads in flight: against the 4-warp probe,
# whether a step's exposed latency falls with the warps (latency-bound) or the kernel reaches
# DRAM bandwidth.
kernel probe_row_steps_w16 target sm_90a

dim R multiple_of 32
const C = 4096

in X: bf16[R, C]
in Y: bf16[R, C]
out Z: bf16[R, C]

grid tiles[r = R / 32] persistent

role rows: warp 0..16

on rows {
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 32 + rows.warp * 2 + i, :], f32)
            let y = cast(Y[t.r * 32 + rows.warp * 2 + i, :], f32)
            store(Z[t.r * 32 + rows.warp * 2 + i, :], cast(x * y, bf16))
        }
    }
}
