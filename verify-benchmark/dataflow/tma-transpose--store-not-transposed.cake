# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: tma-transpose/sm_90a-bf16-128x128-s2-w8
# edit: line 46 (line 40 of the base case)
#   before: tma_store(B[t.c * 128 :+ 128, t.r * 128 :+ 128], out_s)
#   after:  tma_store(B[t.r * 128 :+ 128, t.c * 128 :+ 128], out_s)
# class: index: the TMA store uses the untransposed tile coordinates
# Tiled transpose on sm_90a: B = Aᵀ, A bf16[R, C], B bf16[C, R]. A producer warp TMA-loads 128×128 tiles
# of A into a 2-stage ring; 8 transpose warps copy the tile column by column into an output tile
# (shared → shared, generic proxy), fence the writes for the async proxy, meet, and one elected thread
# TMA-stores the output tile at the transposed coordinates. The output tile is reused only after the
# store has read it.
kernel transpose_bf16_sm_90a_128_s2_w8 target sm_90a

dim R multiple_of 128
dim C multiple_of 128

in A: bf16[R, C] tma [128, 128]
out B: bf16[C, R] tma [128, 128]

grid tiles[r = R / 128, c = C / 128] persistent

smem in_s: bf16[128, 128] stages 2
smem out_s: bf16[128, 128]

role load: warp 0
role xpose: warp 4..12

pipeline ab: stages 2 producer load consumer xpose

on load {
    for t in tiles {
        acquire(ab)
        tma_load(in_s[ab.stage], A[t.r * 128 :+ 128, t.c * 128 :+ 128], ab)
    }
}

on xpose {
    for t in tiles {
        wait(ab)
        for j in 0..128 {
            store(out_s[j, :], in_s[ab.stage, :, j])
        }
        release(ab)
        fence_proxy_async()
        sync_role(xpose)
        tma_store(B[t.r * 128 :+ 128, t.c * 128 :+ 128], out_s)
        tma_store_wait(0)
    }
}
