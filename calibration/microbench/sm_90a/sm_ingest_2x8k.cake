# Probe `sm-ingest` (calibration/microbench/sm_90a/README.md) with sm_ingest.cake's 16 KiB stages, each
# filled by two 64×64 bf16 (8 KiB) TMA boxes: the same stages, hand-offs and bytes per block, twice the
# TMA instructions. Against sm_ingest.cake it tells a cost per TMA instruction (time doubles) from a
# cost per pipeline hand-off (time unchanged).
kernel sm_ingest_2x8k target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[R, C] tma [64, 64] swizzle 128B
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
            tma_load(ring[ab.stage, 0 :+ 64, :], A[t.r * 128 :+ 64, kb * 64 :+ 64], ab)
            tma_load(ring[ab.stage, 64 :+ 64, :], A[t.r * 128 + 64 :+ 64, kb * 64 :+ 64], ab)
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
