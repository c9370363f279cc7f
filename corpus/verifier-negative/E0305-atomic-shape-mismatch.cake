# E0305: atomic_add of a 256-element row into a 128-element window (shape mismatch).
kernel atomic_shape_mismatch target sm_90a

dim R multiple_of 8
const C = 256

in X: f32[R, C]
inout DW: f32[C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    for t in tiles {
        atomic_add(DW[0 :+ 128], X[t.r * 8 + rows.warp, :])
    }
}
