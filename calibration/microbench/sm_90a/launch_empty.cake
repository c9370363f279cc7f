# Launch overhead (calibration/microbench/sm_90a/README.md, bench `launch`): one block per SM, one warp
# each, writes one 32-element row of O and exits. The kernel does almost nothing, so its timed
# duration (CUDA events around the launch, as `cake run` times every program) is the fixed cost of
# a timed launch that the cost model adds to every prediction.
kernel launch_empty target sm_90a

dim T

out O: f32[T, 32]

grid tiles[b = T] persistent

role w: warp 0

on w {
    reg v: f32[32] per warp
    for t in tiles {
        fill(v, 1.0)
        store(O[t.b, :], v)
    }
}
