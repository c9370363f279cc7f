# Row probe, flat loop (README.md, bench `row-flat`): the rotary-embedding loop
# shape: per row, 32 statements of 64 elements each (one 16-byte load per lane from two halves of
# X, one step), in a loop of 32 constant trips that Cake does not unroll. Whether the statements'
# round trips overlap (the C compiler unrolling the constant loop) is what separates it from the
# row_steps probes, whose rows are one long element loop.
kernel probe_row_flat target sm_90a

dim R multiple_of 8
const H = 32
const D = 128

in X: bf16[R, H * D]
out Y: bf16[R, H * D]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    for t in tiles {
        for i in 0..2 {
            let r = t.r * 8 + rows.warp * 2 + i
            for h in 0..H {
                let x1 = cast(X[r, h * D :+ D / 2], f32)
                let x2 = cast(X[r, h * D + D / 2 :+ D / 2], f32)
                store(Y[r, h * D :+ D / 2], cast(x1 - x2, bf16))
                store(Y[r, h * D + D / 2 :+ D / 2], cast(x2 + x1, bf16))
            }
        }
    }
}
