# V230: `a` is a warpgroup's 64×64 accumulator, `b` the same shape held per warp (a warp's own
# 64×64 mma.sync tile): their sum has no one thread layout, so the store has nothing to place.
kernel mixed_layouts_sm_90a target sm_90a

dim M multiple_of 64

out Y: f32[M, 64]

grid tiles[m = M / 64]

role mma: warpgroup 0..1

on mma {
    reg a: f32[64, 64] per warpgroup
    reg b: f32[64, 64] per warp
    for t in tiles {
        zero(a)
        zero(b)
        store(Y[t.m * 64 :+ 64, :], a + b)
    }
}
