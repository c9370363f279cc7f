# V312: atomic_add into a tensor declared `in` (an atomic writes its destination).
kernel atomic_into_input target sm_90a

dim R multiple_of 8
const C = 256

in X: f32[R, C]
in DW: f32[C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    for t in tiles {
        atomic_add(DW[:], X[t.r * 8 + rows.warp, :])
    }
}
