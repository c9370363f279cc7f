# Probe `sm-ingest` (calibration/microbench/sm_90a/README.md) with sm_ingest.cake's 16 KiB boxes through a
# 4-stage ring (64 KiB in flight, half of sm_ingest.cake's): the same stages and bytes per block, so
# against sm_ingest.cake it tells a stage's round trip (time ∝ 1 / stages in flight, Little's law)
# from a per-stage hand-off or the SM's intake (time unchanged).
kernel sm_ingest_s4 target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[R, C] tma [128, 64] swizzle 128B
out S: bf16[R / 128, C]

grid tiles[r = R / 128]

smem ring: bf16[128, 64] stages 4 swizzle 128B align 1024

role load: warp 0
role sink: warp 1

pipeline ab: stages 4 producer load consumer sink

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
