# Transpose probe (calibration/microbench/sm_90a/README.md, bench `transpose`): the
# corpus tma-transpose kernel (sm_90a, bf16, 64×64 tiles, 2 stages, 4 copy warps, here numbered from
# warp 1 so that no warp idles). Each copy warp reads a column of the input tile (a stride of 128
# bytes, so all 32 lanes hit one shared-memory bank) and writes a row of the output tile; one
# elected thread TMA-stores the tile and waits for the store to have read shared memory
# (`tma_store_wait(0)`) before the tile buffer is reused. `transpose_rowcopy.cake` is the same
# kernel with contiguous reads: the two differ only by the strided reads' bank conflicts.
kernel probe_transpose_strided target sm_90a

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
            store(out_s[j, :], in_s[ab.stage, :, j])
        }
        release(ab)
        fence_proxy_async()
        sync_role(xpose)
        tma_store(B[t.c * 64 :+ 64, t.r * 64 :+ 64], out_s)
        tma_store_wait(0)
    }
}
