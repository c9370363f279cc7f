# seeded failure benchmark, class fills-overlap (train; ablates V328): one edit
# base: smem-view/f8e4m3-128x128-sw128
# edit: line(s) 24 (line(s) 18 of the base case)
#   before: view bottom: f8e4m3[64, 128] of tile offset 8192 swizzle 128B
#   after:  view bottom: f8e4m3[64, 128] of tile offset 4096 swizzle 128B
# the bottom view starts halfway into the top one
# Shared-memory views on sm_90a: B = A, f8e4m3[R, C], copied tile by tile (128×128, 128B swizzle).
# The tile's two halves arrive as two TMA boxes of 64×128, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 8192); the TMA store then reads the region as one
# 128×128 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_f8e4m3_128x128_sw128 target sm_90a

dim R multiple_of 128
dim C multiple_of 128

in A: f8e4m3[R, C] tma [64, 128] swizzle 128B
out B: f8e4m3[R, C] tma [128, 128] swizzle 128B

grid tiles[r = R / 128, c = C / 128] persistent

smem tile: f8e4m3[128, 128] swizzle 128B
view top: f8e4m3[64, 128] of tile offset 0 swizzle 128B
view bottom: f8e4m3[64, 128] of tile offset 8192 swizzle 128B

role load: warp 0
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(top, A[t.r * 128 :+ 64, t.c * 128 :+ 128], ab)
        tma_load(bottom, A[t.r * 128 + 64 :+ 64, t.c * 128 :+ 128], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 128 :+ 128], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
