# V230: a 40-element per-warp fragment is neither an accumulator tile, a row vector, an mma
# operand nor at most 32 elements held whole by every lane: it has no register layout.
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
    reg junk: f32[40] per warp
    for t in tiles {
        for i in 0..1 {
            let x = cast(X[t.r * 8 + rows.warp * 1 + i, :], f32)
            let ms = reduce_sum(x * x, axis=0) / C
            store(Y[t.r * 8 + rows.warp * 1 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
        }
    }
}
