# Probe `sm-ingest` (calibration/microbench/sm_90a/README.md) with 64×64 bf16 (8 KiB) boxes through a 16-stage
# ring (128 KiB in flight, as sm_ingest.cake): R / 64 blocks each stream their own 64-row band of A,
# one consumer warp copies each stage's first row out and hands it back. Against sm_ingest.cake's
# 16 KiB boxes it tells a per-stage cost (time ∝ stages) from the SM's intake (time ∝ bytes).
kernel sm_ingest_b8k target sm_90a

dim R multiple_of 64
dim C multiple_of 64

in A: bf16[R, C] tma [64, 64] swizzle 128B
out S: bf16[R / 64, C]

grid tiles[r = R / 64]

smem ring: bf16[64, 64] stages 16 swizzle 128B align 1024

role load: warp 0
role sink: warp 1

pipeline ab: stages 16 producer load consumer sink

on load {
    for t in tiles {
        for kb in 0..C / 64 {
            acquire(ab)
            tma_load(ring[ab.stage], A[t.r * 64 :+ 64, kb * 64 :+ 64], ab)
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
