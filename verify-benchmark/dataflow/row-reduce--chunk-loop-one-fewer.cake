# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: row-reduce/mean-sm_90a-bf16-c8192-w4x1-ch2048
# edit: line 28 (line 22 of the base case)
#   before: for c in 0..C / 2048 {
#   after:  for c in 0..C / 2048 - 1 {
# class: pass-chunk: the chunk loop reads 3 of the row's 4 chunks (then divides by C)
# Row reduction on sm_90a: Out[r] = the mean of X[r, :], X bf16[R, 8192], f32 result. 4 warps per
# block; each warp reduces 1 row(s), reading a row in 4 chunk(s) of 2048 (each lane takes
# consecutive elements, a warp-shuffle butterfly combines the lanes) and folding the chunks into a
# running value in registers.
kernel row_mean_bf16_sm_90a_c8192_w4x1 target sm_90a

dim R multiple_of 4
const C = 8192

in X: bf16[R, C]
out Out: f32[R]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..1 {
            fill(acc, 0.0)
            for c in 0..C / 2048 - 1 {
                let x = cast(X[t.r * 4 + rows.warp * 1 + i, c * 2048 :+ 2048], f32)
                acc = acc + reduce_sum(x, axis=0)
            }
            store(Out[t.r * 4 + rows.warp * 1 + i :+ 1], acc / C)
        }
    }
}
