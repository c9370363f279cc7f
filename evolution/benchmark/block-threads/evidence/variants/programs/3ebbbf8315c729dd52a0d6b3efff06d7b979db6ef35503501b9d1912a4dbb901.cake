# seeded failure benchmark, class block-threads (train; ablates V202): one edit
# base: smem-view/f32-128x16-sw64
# edit: line(s) 26 (line(s) 20 of the base case)
#   before: role load: warp 0
#   after:  role load: warpgroup 8
# the load role placed at warpgroup 8: 1152 threads
# Shared-memory views on sm_90a: B = A, f32[R, C], copied tile by tile (128×16, 64B swizzle).
# The tile's two halves arrive as two TMA boxes of 64×16, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 4096); the TMA store then reads the region as one
# 128×16 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_f32_128x16_sw64 target sm_90a

dim R multiple_of 128
dim C multiple_of 16

in A: f32[R, C] tma [64, 16] swizzle 64B
out B: f32[R, C] tma [128, 16] swizzle 64B

grid tiles[r = R / 128, c = C / 16] persistent

smem tile: f32[128, 16] swizzle 64B
view top: f32[64, 16] of tile offset 0 swizzle 64B
view bottom: f32[64, 16] of tile offset 4096 swizzle 64B

role load: warpgroup 4
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(top, A[t.r * 128 :+ 64, t.c * 16 :+ 16], ab)
        tma_load(bottom, A[t.r * 128 + 64 :+ 64, t.c * 16 :+ 16], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 16 :+ 16], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
