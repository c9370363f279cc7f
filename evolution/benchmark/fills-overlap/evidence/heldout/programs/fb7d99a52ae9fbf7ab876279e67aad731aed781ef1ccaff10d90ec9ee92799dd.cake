# seeded failure benchmark, class fills-overlap (heldout; ablates V328): one edit
# base: smem-view/f32-64x64-nosw
# edit: line(s) 34 (line(s) 28 of the base case)
#   before: tma_load(top, A[t.r * 64 :+ 32, t.c * 64 :+ 64], ab)
#   after:  tma_load(bottom, A[t.r * 64 :+ 32, t.c * 64 :+ 64], ab)
# the first box is loaded into the bottom view
# Shared-memory views on sm_90a: B = A, f32[R, C], copied tile by tile (64×64, no swizzle).
# The tile's two halves arrive as two TMA boxes of 32×64, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 8192); the TMA store then reads the region as one
# 64×64 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_f32_64x64_nosw target sm_90a

dim R multiple_of 64
dim C multiple_of 64

in A: f32[R, C] tma [32, 64]
out B: f32[R, C] tma [64, 64]

grid tiles[r = R / 64, c = C / 64] persistent

smem tile: f32[64, 64]
view top: f32[32, 64] of tile offset 0
view bottom: f32[32, 64] of tile offset 8192

role load: warp 0
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(bottom, A[t.r * 64 :+ 32, t.c * 64 :+ 64], ab)
        tma_load(bottom, A[t.r * 64 + 32 :+ 32, t.c * 64 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 64 :+ 64, t.c * 64 :+ 64], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
