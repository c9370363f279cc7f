# seeded failure benchmark, class block-threads (train; ablates V202): one edit
# base: smem-view/bf16-128x64-sw128
# edit: line(s) 27 (line(s) 21 of the base case)
#   before: role store: warp 1
#   after:  role store: warpgroup 8
# the store role placed at warpgroup 8: 1152 threads
# Shared-memory views on sm_90a: B = A, bf16[R, C], copied tile by tile (128×64, 128B swizzle).
# The tile's two halves arrive as two TMA boxes of 64×64, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 8192); the TMA store then reads the region as one
# 128×64 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_bf16_128x64_sw128 target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[R, C] tma [64, 64] swizzle 128B
out B: bf16[R, C] tma [128, 64] swizzle 128B

grid tiles[r = R / 128, c = C / 64] persistent

smem tile: bf16[128, 64] swizzle 128B
view top: bf16[64, 64] of tile offset 0 swizzle 128B
view bottom: bf16[64, 64] of tile offset 8192 swizzle 128B

role load: warp 0
role store: warpgroup 4

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(top, A[t.r * 128 :+ 64, t.c * 64 :+ 64], ab)
        tma_load(bottom, A[t.r * 128 + 64 :+ 64, t.c * 64 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 64 :+ 64], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
