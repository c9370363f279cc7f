# seeded failure benchmark, class fills-overlap (train; ablates V328): one edit
# base: smem-view/bf16-64x16-sw32
# edit: line(s) 35 (line(s) 29 of the base case)
#   before: tma_load(bottom, A[t.r * 64 + 32 :+ 32, t.c * 16 :+ 16], ab)
#   after:  tma_load(top, A[t.r * 64 + 32 :+ 32, t.c * 16 :+ 16], ab)
# the second box is loaded into the top view
# Shared-memory views on sm_90a: B = A, bf16[R, C], copied tile by tile (64×16, 32B swizzle).
# The tile's two halves arrive as two TMA boxes of 32×16, each into its own view of the one
# region (`top` at byte 0, `bottom` at byte 1024); the TMA store then reads the region as one
# 64×16 box. Two names of the same bytes must agree on swizzle and placement (rules V301–V303);
# the result is only right if the lowering addresses each view at its region's base plus its offset.
kernel view_halves_bf16_64x16_sw32 target sm_90a

dim R multiple_of 64
dim C multiple_of 16

in A: bf16[R, C] tma [32, 16] swizzle 32B
out B: bf16[R, C] tma [64, 16] swizzle 32B

grid tiles[r = R / 64, c = C / 16] persistent

smem tile: bf16[64, 16] swizzle 32B
view top: bf16[32, 16] of tile offset 0 swizzle 32B
view bottom: bf16[32, 16] of tile offset 1024 swizzle 32B

role load: warp 0
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(top, A[t.r * 64 :+ 32, t.c * 16 :+ 16], ab)
        tma_load(top, A[t.r * 64 + 32 :+ 32, t.c * 16 :+ 16], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 64 :+ 64, t.c * 16 :+ 16], tile)
        # The tile may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
