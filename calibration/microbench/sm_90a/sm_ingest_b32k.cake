# Probe `sm-ingest` (calibration/microbench/sm_90a/README.md) with 256×64 bf16 (32 KiB) boxes through a 4-stage
# ring (128 KiB in flight, as sm_ingest.cake): R / 256 blocks each stream their own 256-row band of A,
# one consumer warp copies each stage's first row out and hands it back. Against sm_ingest.cake's
# 16 KiB boxes it tells a per-stage cost (time ∝ stages) from the SM's intake (time ∝ bytes).
kernel sm_ingest_b32k target sm_90a

dim R multiple_of 256
dim C multiple_of 64

in A: bf16[R, C] tma [256, 64] swizzle 128B
out S: bf16[R / 256, C]

grid tiles[r = R / 256]

smem ring: bf16[256, 64] stages 4 swizzle 128B align 1024

role load: warp 0
role sink: warp 1

pipeline ab: stages 4 producer load consumer sink

on load {
    for t in tiles {
        for kb in 0..C / 64 {
            acquire(ab)
            tma_load(ring[ab.stage], A[t.r * 256 :+ 256, kb * 64 :+ 64], ab)
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
