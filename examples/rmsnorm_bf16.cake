# RMSNorm for Hopper: Y[r, :] = X[r, :] · rsqrt(mean(X[r, :]²) + eps) · W, bf16 in and out, f32 math,
# rows of C = 4096. Eight warps per block, each normalizing two rows of the block's 16-row tile:
# the row's sum of squares is split over the warp's lanes and combined by a butterfly (every lane
# gets it), then the normalized row is written. Blocks are small and many (one per 16 rows),
# so several run on each SM and keep enough loads in flight; a persistent grid of one 4-warp
# block per SM was 1.5× slower on the H200 (cost hint C007).
# On the H200 at R = 16384: 0.094 ms, 0.89× torch's F.rms_norm (this program as corpus case
# rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16; benchmarks/RESULTS.md).
kernel rmsnorm_bf16 target sm_90a

dim R multiple_of 16
const C = 4096

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
