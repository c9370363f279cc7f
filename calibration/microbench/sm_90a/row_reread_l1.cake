# L1 re-read probe (README.md, bench `row-reread-l1`): the latency of a scalar element loop's
# loads that hit the SM's L1. Per 4096-wide bf16 row, the absmax (a vectorized reduction that
# brings the row in from DRAM), then the row scaled and stored as fp8 eight times, into eight
# column blocks of Q: each store is a scalar loop (fp8 stores do not vectorize) of 128 steps per
# lane re-reading X from L1 (4 warps x 2 rows x 8 KiB per block), 4 steps in flight. The eight
# re-reads put about eight times row-reread's L1 steps on the path, so the fit can see the hit.
# 4 warps per SM, persistent.
kernel probe_row_reread_l1 target sm_90a

dim R multiple_of 8
const C = 4096

in X: bf16[R, C]
out Q: f8e4m3[R, 8 * C]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    reg scale: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            scale = max(reduce_max(abs(x), axis=0) / 448.0, 0.000001)
            for k in 0..8 {
                store(Q[t.r * 8 + rows.warp * 2 + i, k * C :+ C], cast(x * scale, f8e4m3))
            }
        }
    }
}
