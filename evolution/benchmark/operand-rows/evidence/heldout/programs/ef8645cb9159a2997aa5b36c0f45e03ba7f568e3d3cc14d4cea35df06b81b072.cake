# seeded failure benchmark, class operand-rows (heldout; ablates V325): one edit
# base: row-reduce/absmax-sm_90a-bf16-c4096-w4x2
# edit: line(s) 29 (line(s) 23 of the base case)
#   before: let x = cast(X[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096], f32)
#   after:  let x = cast(X[t.r * 8 + rows.warp * 2 + i + 1, c * 4096 :+ 4096], f32)
# the reduced row is read one row below the row stored
# Row reduction on sm_90a: Out[r] = the largest magnitude (the amax of per-row fp8 scaling) of X[r, :], X bf16[R, 4096], f32 result. 4 warps per
# block; each warp reduces 2 row(s), reading a row in 1 chunk(s) of 4096 (each lane takes
# consecutive elements, a warp-shuffle butterfly combines the lanes) and folding the chunks into a
# running value in registers.
kernel row_absmax_bf16_sm_90a_c4096_w4x2 target sm_90a

dim R multiple_of 8
const C = 4096

in X: bf16[R, C]
out Out: f32[R]

grid tiles[r = R / 8]

role rows: warp 0..4

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            fill(acc, 0.0)
            for c in 0..C / 4096 {
                let x = cast(X[t.r * 8 + rows.warp * 2 + i + 1, c * 4096 :+ 4096], f32)
                acc = max(acc, reduce_max(abs(x), axis=0))
            }
            store(Out[t.r * 8 + rows.warp * 2 + i :+ 1], acc)
        }
    }
}
