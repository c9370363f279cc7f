kernel so4 target sm_90a
dim R multiple_of 32
const C = 1024
in X: bf16[R, C]
grid tiles[r = R / 32]
role rows: warp 0..8
on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..4 {
   for c in 0..C / 1024 {
       let x = cast(X[t.r * 32 + rows.warp * 4 + i, c * 1024 :+ 1024], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(8 - m_new), axis=0)
            }
            for c in 0..C / 1024 {
            }
        }
    }
}