# seeded failure benchmark, class fills-overlap (heldout; ablates V328): one edit
# base: smem-view/f16-128x32-sw64
# edit: line(s) 24 (line(s) 18 of the base case)
#   before: view bottom: f16[64, 32] of tile offset 4096 swizzle 64B
#   after:  view bottom: f16[64, 32] of tile offset 1024 swizzle 64B
# the bottom view starts a quarter into the top one
# Shared-memory views on sm_90a: B = A, f16[R, C], copied tile by tile (128×32, 64B swizzle).
# The tile's two halves arrive as two TMA boxes of 64×32, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 4096); the TMA store then reads the region as one
# 128×32 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_f16_128x32_sw64 target sm_90a

dim R multiple_of 128
dim C multiple_of 32

in A: f16[R, C] tma [64, 32] swizzle 64B
out B: f16[R, C] tma [128, 32] swizzle 64B

grid tiles[r = R / 128, c = C / 32] persistent

smem tile: f16[128, 32] swizzle 64B
view top: f16[64, 32] of tile offset 0 swizzle 64B
view bottom: f16[64, 32] of tile offset 1024 swizzle 64B

role load: warp 0
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(top, A[t.r * 128 :+ 64, t.c * 32 :+ 32], ab)
        tma_load(bottom, A[t.r * 128 + 64 :+ 64, t.c * 32 :+ 32], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 32 :+ 32], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
