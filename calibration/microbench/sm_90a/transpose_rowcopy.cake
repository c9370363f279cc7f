# Transpose probe, contrast (README.md, bench `transpose`): `transpose_strided.cake`
# with each copy warp reading a ROW of the input tile (contiguous, conflict-free) instead of a
# column; the output tile still goes out at the transposed coordinates with one TMA store and
# `tma_store_wait(0)` per tile. Same bytes, same barriers, same stores: what separates the two is
# the strided shared reads; what both keep is the exposed wait on every TMA store.
kernel probe_transpose_rowcopy target sm_90a

dim R multiple_of 64
dim C multiple_of 64

in A: bf16[R, C] tma [64, 64]
out B: bf16[C, R] tma [64, 64]

grid tiles[r = R / 64, c = C / 64] persistent

smem in_s: bf16[64, 64] stages 2
smem out_s: bf16[64, 64]

role load: warp 0
role xpose: warp 1..5

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
            store(out_s[j, :], in_s[ab.stage, j, :])
        }
        release(ab)
        fence_proxy_async()
        sync_role(xpose)
        tma_store(B[t.c * 64 :+ 64, t.r * 64 :+ 64], out_s)
        tma_store_wait(0)
    }
}
