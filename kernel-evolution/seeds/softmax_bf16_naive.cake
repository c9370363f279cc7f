# Row softmax for Hopper, the seed of kernel evolution (contracts/softmax.toml):
# Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max), bf16 in and out, f32 math, rows of 4096.
# W warps per block, each owning RPW rows of the block's W·RPW-row tile; a first pass keeps the
# running maximum and the rescaled sum, a second writes the normalized row. From
# examples/softmax_bf16.cake with its tunables as consts.
kernel softmax_bf16 target sm_90a

# Warps per block and rows per warp.
const W = 4
const RPW = 2
const BR = W * RPW
const C = 4096

dim R multiple_of BR

in X: bf16[R, C]
out Y: bf16[R, C]

grid tiles[r = R / BR]

role rows: warp 0..W

on rows {
    reg m: f32[1] per warp
    reg s: f32[1] per warp
    for t in tiles {
        for i in 0..RPW {
            fill(m, -inf)
            fill(s, 0.0)
            for c in 0..C / 4096 {
                let x = cast(X[t.r * BR + rows.warp * RPW + i, c * 4096 :+ 4096], f32)
                let m_new = max(m, reduce_max(x, axis=0))
                s = s * exp(m - m_new) + reduce_sum(exp(x - m_new), axis=0)
                m = m_new
            }
            for c in 0..C / 4096 {
                let x = cast(X[t.r * BR + rows.warp * RPW + i, c * 4096 :+ 4096], f32)
                store(Y[t.r * BR + rows.warp * RPW + i, c * 4096 :+ 4096], cast(exp(x - m) / s, bf16))
            }
        }
    }
}
