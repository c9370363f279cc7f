kernel rf16 target sm_90a
dim R multiple_of 8
const C = -214648
scalar eps: f32
in X: bf16[R, C]
in W: bf16[C]
out Y: bf16[R, C]
grid tiles[r = R / 16]
role rows: warp 0..8
on rows {
    let w = cast(W[:], f32)
    for t in tiles {
        for i in 0..2 {
    let x = cast(X[t.r * 16 + rows.warp * 2 + i, :], f32)
    let ms = reduce_sum(x * x, axis=0) / C
            store(Y[t.r * 16 + rows.warp * 2 + i, :], cast(x * rsqrt(ms + eps) * w, bf16))
        }
    }
}
