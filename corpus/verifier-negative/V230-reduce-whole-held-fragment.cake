# V230: `part` is held whole by every lane (a per-warp f32[4]), and a reduction of it to one value
# has no lowering: reductions to one value split window math over the lanes, or reduce an
# accumulator's rows. (Such a reduction once passed `check` whenever its `let` named a scalar.)
kernel whole_held_reduction_sm_90a target sm_90a

dim R multiple_of 4

in X: f32[R, 4]
out Y: f32[R, 1]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    reg part: f32[4] per warp
    for t in tiles {
        fill(part, 1.0)
        let total = reduce_sum(part, axis=0)
        store(Y[t.r * 4 + rows.warp, :], X[t.r * 4 + rows.warp, 0 :+ 1] * total)
    }
}
