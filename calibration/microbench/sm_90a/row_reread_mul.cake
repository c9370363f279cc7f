# Row re-read probe (README.md, bench `row-reread`): fp8-quant-per-token's loop shape without its
# division. Per 4096-wide bf16 row, the absmax (a vectorized reduction that brings the row in from
# DRAM), then the row scaled and stored as fp8, which the lowering emits one element per lane and
# step (fp8 stores do not vectorize) re-reading X: 128 dependent-free steps whose loads hit the
# SM's L1 (4 warps x 2 rows x 8 KiB per block). 4 warps per SM, persistent.
kernel probe_row_reread_mul target sm_90a

dim R multiple_of 8
const C = 4096

in X: bf16[R, C]
out Q: f8e4m3[R, C]

grid tiles[r = R / 8] persistent

role rows: warp 0..4

on rows {
    reg scale: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            let x = cast(X[t.r * 8 + rows.warp * 2 + i, :], f32)
            scale = max(reduce_max(abs(x), axis=0) / 448.0, 0.000001)
            store(Q[t.r * 8 + rows.warp * 2 + i, :], cast(x * scale, f8e4m3))
        }
    }
}
