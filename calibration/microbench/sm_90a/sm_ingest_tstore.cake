# Probe `sm-ingest` (calibration/microbench/sm_90a/README.md) with sm_ingest.cake's sink writing each
# stage's first row by TMA store (and waiting for it to read the stage) instead of a generic store:
# against sm_ingest.cake it tells a per-stage cost of the consumer's generic store before its release
# from one of the producer's acquire.
kernel sm_ingest_tstore target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[R, C] tma [128, 64] swizzle 128B
out S: bf16[R / 128, C] tma [1, 64] swizzle 128B

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
            tma_store(S[t.r :+ 1, kb * 64 :+ 64], ring[ab.stage, 0 :+ 1, :])
            tma_store_wait(0)
            release(ab)
        }
    }
}
