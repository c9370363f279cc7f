# seeded failure benchmark, class block-threads (heldout; ablates V202): one edit
# base: tma-transpose/sm_90a-bf16-64x64-s2-w4
# edit: line(s) 25 (line(s) 19 of the base case)
#   before: role load: warp 0
#   after:  role load: warpgroup 8
# the load role placed at warpgroup 8, after the transposing warps: 1152 threads
# Tiled transpose on sm_90a: B = Aᵀ, A bf16[R, C], B bf16[C, R]. A producer warp TMA-loads 64×64 tiles
# of A into a 2-stage ring; 4 transpose warps copy the tile column by column into an output tile
# (shared → shared, generic proxy), fence the writes for the async proxy, meet, and one elected thread
# TMA-stores the output tile at the transposed coordinates. The output tile is reused only after the
# store has read it.
kernel transpose_bf16_sm_90a_64_s2_w4 target sm_90a

dim R multiple_of 64
dim C multiple_of 64

in A: bf16[R, C] tma [64, 64]
out B: bf16[C, R] tma [64, 64]

grid tiles[r = R / 64, c = C / 64] persistent

smem in_s: bf16[64, 64] stages 2
smem out_s: bf16[64, 64]

role load: warpgroup 8
role xpose: warp 4..8

pipeline ab: stages 2 producer load consumer xpose

on load {
    for t in tiles {
        acquire(ab)
        tma_load(in_s[ab.stage], A[t.r * 64 :+ 64, t.c * 64 :+ 64], ab)
    }
}

on xpose {
    for t in tiles {
        wait(ab)
        for j in 0..64 {
            store(out_s[j, :], in_s[ab.stage, :, j])
        }
        release(ab)
        fence_proxy_async()
        sync_role(xpose)
        tma_store(B[t.c * 64 :+ 64, t.r * 64 :+ 64], out_s)
        tma_store_wait(0)
    }
}
