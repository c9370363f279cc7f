# seeded failure benchmark, class fills-overlap (train; ablates V328): one edit
# base: smem-view/bf16-256x64-sw128
# edit: line(s) 24 (line(s) 18 of the base case)
#   before: view bottom: bf16[128, 64] of tile offset 16384 swizzle 128B
#   after:  view bottom: bf16[128, 64] of tile offset 8192 swizzle 128B
# the bottom view starts halfway into the top one (8192 for a 16384-B half)
# Shared-memory views on sm_90a: B = A, bf16[R, C], copied tile by tile (256×64, 128B swizzle).
# The tile's two halves arrive as two TMA boxes of 128×64, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 16384); the TMA store then reads the region as one
# 256×64 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_bf16_256x64_sw128 target sm_90a

dim R multiple_of 256
dim C multiple_of 64

in A: bf16[R, C] tma [128, 64] swizzle 128B
out B: bf16[R, C] tma [256, 64] swizzle 128B

grid tiles[r = R / 256, c = C / 64] persistent

smem tile: bf16[256, 64] swizzle 128B
view top: bf16[128, 64] of tile offset 0 swizzle 128B
view bottom: bf16[128, 64] of tile offset 16384 swizzle 128B

role load: warp 0
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(top, A[t.r * 256 :+ 128, t.c * 64 :+ 64], ab)
        tma_load(bottom, A[t.r * 256 + 128 :+ 128, t.c * 64 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 256 :+ 256, t.c * 64 :+ 64], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
