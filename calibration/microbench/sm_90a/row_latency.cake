# Row-kernel latency probe (README.md, `[[unfitted]]` entry `row-latency`): a squared-norm row
# reduction with one warp per block and a persistent grid, so each warp walks its rows one after
# another: load a 256-element bf16 row (512 bytes, 16 per lane), a five-step shuffle butterfly,
# one 4-byte store. 132 one-warp blocks keep about 66 KiB in flight on the whole GPU, far below
# what DRAM bandwidth needs, so each row costs a dependent global-load round trip plus the
# reduction's chain, not bytes. `row_bandwidth.cake` reduces the same rows with 4 warps × 8 rows
# per block and one tile per block (every SM full of warps): the bandwidth-bound contrast.
kernel probe_row_latency target sm_90a

dim R
const C = 256

in X: bf16[R, C]
out Out: f32[R]

grid tiles[r = R] persistent

role rows: warp 0

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        fill(acc, 0.0)
        let x = cast(X[t.r, :], f32)
        acc = acc + reduce_sum(x * x, axis=0)
        store(Out[t.r :+ 1], acc)
    }
}
