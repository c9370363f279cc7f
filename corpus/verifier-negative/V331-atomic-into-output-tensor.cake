# V331: atomic_add into an `out` tensor: the reduction reads the element's prior value, which an `out` tensor leaves undefined (declare it `inout`).
kernel atomic_into_output target sm_90a

dim R multiple_of 8
const C = 256

in X: f32[R, C]
out DW: f32[C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    for t in tiles {
        atomic_add(DW[:], X[t.r * 8 + rows.warp, :])
    }
}
