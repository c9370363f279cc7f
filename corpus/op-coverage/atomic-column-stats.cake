# atomic_add / atomic_max / atomic_min: per-column statistics of a row-major matrix (the dgamma
# shape of a norm backward: DW[c] += Σ_r DY[r, c] · X[r, c]), reduced across warps and blocks with
# global atomics instead of a second kernel. 4 warps per block, each walking 8 rows of a 32-row tile;
# for every row the warp's lanes split the C = 1024 columns and issue one `red.global` per element
# into DW (the product), CMAX and CMIN (the column max / min of X). Every warp and every tile adds
# into the same elements: that is an accumulation, not a race (V321 counts only stores), and the
# three outputs are `inout` (V331) because the reductions read their initial values (0, -inf, +inf).
kernel atomic_column_stats target sm_90a

dim R multiple_of 32
const C = 1024

in X: bf16[R, C]
in DY: bf16[R, C]
inout DW: f32[C]
inout CMAX: f32[C]
inout CMIN: f32[C]

grid tiles[r = R / 32]

role rows: warp 0..4

on rows {
    for t in tiles {
        for i in 0..8 {
            let x = cast(X[t.r * 32 + rows.warp * 8 + i, :], f32)
            atomic_add(DW[:], cast(DY[t.r * 32 + rows.warp * 8 + i, :], f32) * x)
            atomic_max(CMAX[:], x)
            atomic_min(CMIN[:], x)
        }
    }
}
