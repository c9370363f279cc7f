# Row-step probe, four divisions (README.md, bench `row-steps`): `row_steps_div.cake` with four
# dependent IEEE f32 divides per element, x / (|y| + 1) / (|y| + 2) / (|y| + 3) / (|y| + 4) (the
# divisors keep the result finite), so the divisions, not the DRAM round trips, take most of a
# warp's path at 4 warps per SM: the bench can tell `div_latency_ns` from `row_trip_latency_ns`.
kernel probe_row_steps_div4 target sm_90a

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
            let y = abs(cast(Y[t.r * 8 + rows.warp * 2 + i, :], f32))
            store(Z[t.r * 8 + rows.warp * 2 + i, :], cast(x / (y + 1.0) / (y + 2.0) / (y + 3.0) / (y + 4.0), bf16))
        }
    }
}
