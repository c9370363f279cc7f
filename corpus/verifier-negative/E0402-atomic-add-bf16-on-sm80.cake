# E0402: atomic_add of bf16 on sm_80: `red.global.add.noftz.bf16` exists only from sm_90 (feature atom_sm90).
kernel atomic_bf16_on_sm80 target sm_80

dim R multiple_of 8
const C = 256

in X: bf16[R, C]
inout DW: bf16[C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    for t in tiles {
        atomic_add(DW[:], X[t.r * 8 + rows.warp, :])
    }
}
