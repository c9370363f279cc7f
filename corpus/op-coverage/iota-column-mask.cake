# iota over window math: each row of X keeps its first K = 300 columns and zeroes the rest (a
# padding mask, the row-kernel counterpart of the causal mask over a score fragment). `iota` of the
# row window is each element's column; the store splits the 1024 columns over the warp's lanes in
# 16-byte vectors and the column index follows the split.
kernel iota_column_mask target sm_90a

dim R multiple_of 8
const C = 1024
const K = 300

in X: f32[R, C]
out Y: f32[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..8

on rows {
    for t in tiles {
        let x = X[t.r * 8 + rows.warp, :]
        store(Y[t.r * 8 + rows.warp, :], select(iota(x, axis=0) < K, x, 0.0))
    }
}
