# expect: type error: `max` of the f32 running value `acc` and a bf16 row maximum (the row `x` is not cast to f32)
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
                let x = X[t.r * 8 + rows.warp * 2 + i, c * 4096 :+ 4096]
                acc = max(acc, reduce_max(abs(x), axis=0))
            }
            store(Out[t.r * 8 + rows.warp * 2 + i :+ 1], acc)
        }
    }
}
