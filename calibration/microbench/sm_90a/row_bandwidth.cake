# Row-kernel bandwidth contrast (README.md, `[[unfitted]]` entry `row-latency`): the corpus
# row-reduce kernel sqnorm-sm_90a-bf16-c256-w4x8 as it is: the rows of `row_latency.cake` (bf16,
# 256 wide, squared norm) with 4 warps per block, 8 rows per warp and one 32-row tile per block, so
# every SM holds many warps and loads in flight: at 69 MiB DRAM bandwidth, not load latency,
# should bound it (the model, which makes it latency-bound at 1.4 TB/s, is what the probe tests).
kernel probe_row_bandwidth target sm_90a

dim R multiple_of 32
const C = 256

in X: bf16[R, C]
out Out: f32[R]

grid tiles[r = R / 32]

role rows: warp 0..4

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..8 {
            fill(acc, 0.0)
            for c in 0..C / 256 {
                let x = cast(X[t.r * 32 + rows.warp * 8 + i, c * 256 :+ 256], f32)
                acc = acc + reduce_sum(x * x, axis=0)
            }
            store(Out[t.r * 32 + rows.warp * 8 + i :+ 1], acc)
        }
    }
}
