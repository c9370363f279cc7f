# V231: `y` names window math (no register layout), so each use recomputes it -- and it holds a
# reduction, which would run again for every element. Name the reduction itself instead.
kernel rmsnorm_bf16_sm_90a_c3584_w8x1 target sm_90a

dim R multiple_of 8
const C = 3584

scalar eps: f32

in X: bf16[R, C]
in W: f32[C]
out Y: bf16[R, C]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    let w = W[:]
    for t in tiles {
        for i in 0..1 {
            let x = cast(X[t.r * 8 + rows.warp * 1 + i, :], f32)
            let y = x * rsqrt(reduce_sum(x * x, axis=0) / C + eps)
            store(Y[t.r * 8 + rows.warp * 1 + i, :], cast(y * w, bf16))
        }
    }
}
