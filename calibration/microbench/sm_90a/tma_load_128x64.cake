# DRAM read bandwidth through TMA, box 128×64 bf16 (16 KiB) (calibration/microbench/sm_90a/README.md,
# bench `tma-load`). One producer warp per SM streams boxes of a tensor several times larger than the
# L2 into a 8-stage ring (128 KiB in flight per SM); one consumer warp waits for each stage, copies its
# first row out (so the output is written and the load is used) and hands the stage back. Every byte
# of A is read from DRAM once; nothing else is on the critical path.
kernel tma_load_128x64 target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[R, C] tma [128, 64] swizzle 128B
out S: bf16[R / 128, C]

grid tiles[r = R / 128, c = C / 64] persistent

smem ring: bf16[128, 64] stages 8 swizzle 128B align 1024

role load: warp 0
role sink: warp 1

pipeline ab: stages 8 producer load consumer sink

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 128 :+ 128, t.c * 64 :+ 64], ab)
    }
}

on sink {
    for t in tiles {
        wait(ab)
        store(S[t.r, t.c * 64 :+ 64], ring[ab.stage, 0, :])
        release(ab)
    }
}
