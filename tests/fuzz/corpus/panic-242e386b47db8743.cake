kernel r target sm_90a
dim R multiple_of 16
const C = 4096
in X: f32[R, C]
grid tiles[r = R / 16]
role rows: warp 0..8
on rows {
    reg sum: f32[1] per warp
    reg dev: f32[1] per warp
    for t in tiles {
for i in 0..2 {
    for c in 0..C / 1024 {
            }
            let mean = sum / 4096.0
            for c in 0..C / 1024 - 1 {
                let x = X[t.r * 16 +i, c * 1024 :+ 1]
                dev = dev + reduce_sum((x - mean) * (x - mean), axis=0)
            }
        }
    }
}
