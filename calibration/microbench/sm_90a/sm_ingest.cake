# What one SM takes in from the memory system when it has it to itself (calibration/microbench/sm_90a/
# README.md, probe `sm-ingest`, with sm_ingest_b8k.cake and sm_ingest_b32k.cake). R / 128 blocks (8 and 16: a few SMs, as in kmeans-update's 16-tile
# grids) each stream their own 128-row band of A, C / 64 boxes of 128×64 bf16 (16 KiB), through an
# 8-stage ring (128 KiB in flight per SM); one consumer warp waits for each stage, copies its first
# row out and hands it back. So few SMs cannot load the DRAM or the L2 (16 of them pull at most a
# third of the DRAM's rate), and the SM's own intake is the bottleneck.
kernel sm_ingest target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[R, C] tma [128, 64] swizzle 128B
out S: bf16[R / 128, C]

grid tiles[r = R / 128]

smem ring: bf16[128, 64] stages 8 swizzle 128B align 1024

role load: warp 0
role sink: warp 1

pipeline ab: stages 8 producer load consumer sink

on load {
    for t in tiles {
        for kb in 0..C / 64 {
            acquire(ab)
            tma_load(ring[ab.stage], A[t.r * 128 :+ 128, kb * 64 :+ 64], ab)
        }
    }
}

on sink {
    for t in tiles {
        for kb in 0..C / 64 {
            wait(ab)
            store(S[t.r, kb * 64 :+ 64], ring[ab.stage, 0, :])
            release(ab)
        }
    }
}
