# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: row-reduce/max-sm_90a-f16-c2048-w8x4
# edit: line 19 (line 13 of the base case)
#   before: grid tiles[r = R / 32]
#   after:  grid tiles[r = R / 64]
# class: coverage: a tile space of R/64 for 32-row tiles
# Row reduction on sm_90a: Out[r] = the maximum of X[r, :], X f16[R, 2048], f32 result. 8 warps per
# block; each warp reduces 4 row(s), reading a row in 1 chunk(s) of 2048 (each lane takes
# consecutive elements, a warp-shuffle butterfly combines the lanes) and folding the chunks into a
# running value in registers.
kernel row_max_f16_sm_90a_c2048_w8x4 target sm_90a

dim R multiple_of 32
const C = 2048

in X: f16[R, C]
out Out: f32[R]

grid tiles[r = R / 64]

role rows: warp 0..8

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..4 {
            fill(acc, -inf)
            for c in 0..C / 2048 {
                let x = cast(X[t.r * 32 + rows.warp * 4 + i, c * 2048 :+ 2048], f32)
                acc = max(acc, reduce_max(x, axis=0))
            }
            store(Out[t.r * 32 + rows.warp * 4 + i :+ 1], acc)
        }
    }
}
