# seeded failure benchmark, class block-threads (train; ablates V202): one edit
# base: tma-copy/sm_90a-f32-128x64-s3-nosw
# edit: line(s) 23 (line(s) 17 of the base case)
#   before: role load: warp 0
#   after:  role load: warpgroup 8
# the load role placed at warpgroup 8, after the store warp: 1152 threads
# TMA tile copy on sm_90a: B = A, f32[R, C], moved box by box (128×64, no swizzle) through a
# 3-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_f32_sm_90a_128x64_s3 target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: f32[R, C] tma [128, 64]
out B: f32[R, C] tma [128, 64]

grid tiles[r = R / 128, c = C / 64] persistent

smem ring: f32[128, 64] stages 3

role load: warpgroup 7
role store: warp 1

pipeline ab: stages 3 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 128 :+ 128, t.c * 64 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 64 :+ 64], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
