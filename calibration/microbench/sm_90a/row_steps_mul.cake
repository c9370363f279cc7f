# Row-step probe (README.md, `[[unfitted]]` entry `row-steps`): the corpus elementwise kernel shape
# with the cheapest expression, 4 warps per SM in a persistent grid, two 4096-wide bf16 rows per
# warp and tile, each row 16 steps of one 16-byte load per lane from X and from Y and one 16-byte
# store. Nothing but the loads' round trips is on a warp's path, so its time per step is the
# row loop's exposed memory latency at this occupancy. `row_steps_div.cake` is the same with a
# division (an IEEE f32 divide per element), `row_steps_w16.cake` the same with 16 warps per SM.
kernel probe_row_steps_mul target sm_90a

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
            store(Z[t.r * 8 + rows.warp * 2 + i, :], cast(x * y, bf16))
        }
    }
}
