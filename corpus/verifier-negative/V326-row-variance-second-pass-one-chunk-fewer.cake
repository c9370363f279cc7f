# A two-pass row variance on sm_90a (the row-reduce family's shape): pass 1 sums each row of X to
# its mean, pass 2 sums the squared deviations from it. Each warp reduces 2 rows in 4 chunks of
# 1024. The second pass stops one chunk early, so the variance leaves out the row's last quarter.
kernel row_variance_f32_sm_90a_c4096_w8x2 target sm_90a

dim R multiple_of 16
const C = 4096

in X: f32[R, C]
out Var: f32[R]

grid tiles[r = R / 16]

role rows: warp 0..8

on rows {
    reg sum: f32[1] per warp
    reg dev: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            fill(sum, 0.0)
            fill(dev, 0.0)
            for c in 0..C / 1024 {
                let x = X[t.r * 16 + rows.warp * 2 + i, c * 1024 :+ 1024]
                sum = sum + reduce_sum(x, axis=0)
            }
            let mean = sum / 4096.0
            for c in 0..C / 1024 - 1 {
                let x = X[t.r * 16 + rows.warp * 2 + i, c * 1024 :+ 1024]
                dev = dev + reduce_sum((x - mean) * (x - mean), axis=0)
            }
            store(Var[t.r * 16 + rows.warp * 2 + i :+ 1], dev / 4096.0)
        }
    }
}
