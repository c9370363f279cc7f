# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: row-reduce/min-sm_90a-bf16-c512-w4x8
# edit: line 13 (line 7 of the base case)
#   before: dim R multiple_of 32
#   after:  dim R multiple_of 16
# class: divisibility: R multiple_of 16 with 32-row tiles: R = 1232 leaves 16 rows unwritten
# Row reduction on sm_90a: Out[r] = the minimum of X[r, :], X bf16[R, 512], f32 result. 4 warps per
# block; each warp reduces 8 row(s), reading a row in 1 chunk(s) of 512 (each lane takes
# consecutive elements, a warp-shuffle butterfly combines the lanes) and folding the chunks into a
# running value in registers.
kernel row_min_bf16_sm_90a_c512_w4x8 target sm_90a

dim R multiple_of 16
const C = 512

in X: bf16[R, C]
out Out: f32[R]

grid tiles[r = R / 32]

role rows: warp 0..4

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..8 {
            fill(acc, inf)
            for c in 0..C / 512 {
                let x = cast(X[t.r * 32 + rows.warp * 8 + i, c * 512 :+ 512], f32)
                acc = min(acc, reduce_min(x, axis=0))
            }
            store(Out[t.r * 32 + rows.warp * 8 + i :+ 1], acc)
        }
    }
}
