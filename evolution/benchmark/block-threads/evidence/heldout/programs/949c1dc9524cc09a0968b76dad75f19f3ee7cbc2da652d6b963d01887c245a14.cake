# seeded failure benchmark, class block-threads (heldout; ablates V202): one edit
# base: tma-transpose/sm_90a-f16-64x64-s3-w8
# edit: line(s) 26 (line(s) 20 of the base case)
#   before: role xpose: warp 4..12
#   after:  role xpose: warpgroup 4..12
# the transposing warps' range written in warpgroups: 1536 threads
# Tiled transpose on sm_90a: B = Aᵀ, A f16[R, C], B f16[C, R]. A producer warp TMA-loads 64×64 tiles
# of A into a 3-stage ring; 8 transpose warps copy the tile column by column into an output tile
# (shared → shared, generic proxy), fence the writes for the async proxy, meet, and one elected thread
# TMA-stores the output tile at the transposed coordinates. The output tile is reused only after the
# store has read it.
kernel transpose_f16_sm_90a_64_s3_w8 target sm_90a

dim R multiple_of 64
dim C multiple_of 64

in A: f16[R, C] tma [64, 64]
out B: f16[C, R] tma [64, 64]

grid tiles[r = R / 64, c = C / 64] persistent

smem in_s: f16[64, 64] stages 3
smem out_s: f16[64, 64]

role load: warp 0
role xpose: warpgroup 4..12

pipeline ab: stages 3 producer load consumer xpose

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
