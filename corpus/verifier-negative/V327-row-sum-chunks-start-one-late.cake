# Row reduction on sm_90a: Out[r] = the sum of X[r, :], X f32[R, 4096], f32 result. 8 warps per
# block; each warp reduces 2 row(s), reading a row in 4 chunk(s) of 1024 (each lane takes
# consecutive elements, a warp-shuffle butterfly combines the lanes) and folding the chunks into a
# running value in registers.
kernel row_sum_f32_sm_90a_c4096_w8x2 target sm_90a

dim R multiple_of 16
const C = 4096

in X: f32[R, C]
out Out: f32[R]

grid tiles[r = R / 16]

role rows: warp 0..8

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            fill(acc, 0.0)
            for c in 0..C / 1024 {
                let x = X[t.r * 16 + rows.warp * 2 + i, c * 1024 + 1024 :+ 1024]
                acc = acc + reduce_sum(x, axis=0)
            }
            store(Out[t.r * 16 + rows.warp * 2 + i :+ 1], acc)
        }
    }
}
