# seeded failure benchmark, class tile-coverage (heldout; ablates V320, V321, V323): one edit
# base: tma-transpose/sm_90a-bf16-32x32-s4-w4
# edit: line(s) 20 (line(s) 14 of the base case)
#   before: grid tiles[r = R / 32, c = C / 32] persistent
#   after:  grid tiles[r = R / 32, c = C / 64] persistent
# a column tile axis of C/64 for 32-column tiles
# Tiled transpose on sm_90a: B = Aᵀ, A bf16[R, C], B bf16[C, R]. A producer warp TMA-loads 32×32 tiles
# of A into a 4-stage ring; 4 transpose warps copy the tile column by column into an output tile
# (shared → shared, generic proxy), fence the writes for the async proxy, meet, and one elected thread
# TMA-stores the output tile at the transposed coordinates. The output tile is reused only after the
# store has read it.
kernel transpose_bf16_sm_90a_32_s4_w4 target sm_90a

dim R multiple_of 32
dim C multiple_of 32

in A: bf16[R, C] tma [32, 32]
out B: bf16[C, R] tma [32, 32]

grid tiles[r = R / 32, c = C / 64] persistent

smem in_s: bf16[32, 32] stages 4
smem out_s: bf16[32, 32]

role load: warp 0
role xpose: warp 4..8

pipeline ab: stages 4 producer load consumer xpose

on load {
    for t in tiles {
        acquire(ab)
        tma_load(in_s[ab.stage], A[t.r * 32 :+ 32, t.c * 32 :+ 32], ab)
    }
}

on xpose {
    for t in tiles {
        wait(ab)
        for j in 0..32 {
            store(out_s[j, :], in_s[ab.stage, :, j])
        }
        release(ab)
        fence_proxy_async()
        sync_role(xpose)
        tma_store(B[t.c * 32 :+ 32, t.r * 32 :+ 32], out_s)
        tma_store_wait(0)
    }
}
