# seeded failure benchmark, class smem-capacity (train; ablates V201): one edit
# base: tma-copy/sm_90a-bf16-256x64-s3-sw128
# edit: line(s) 21, 26 (line(s) 15, 20 of the base case)
#   before: smem ring: bf16[256, 64] stages 3 swizzle 128B align 1024 | pipeline ab: stages 3 producer load consumer store
#   after:  smem ring: bf16[256, 64] stages 8 swizzle 128B align 1024 | pipeline ab: stages 8 producer load consumer store
# an 8-stage ring of 32 KB boxes for more bytes in flight
# TMA tile copy on sm_90a: B = A, bf16[R, C], moved box by box (256×64, 128B swizzle) through a
# 3-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_bf16_sm_90a_256x64_s3_sw128 target sm_90a

dim R multiple_of 256
dim C multiple_of 64

in A: bf16[R, C] tma [256, 64] swizzle 128B
out B: bf16[R, C] tma [256, 64] swizzle 128B

grid tiles[r = R / 256, c = C / 64] persistent

smem ring: bf16[256, 64] stages 4 swizzle 128B align 1024

role load: warp 0
role store: warp 1

pipeline ab: stages 4 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 256 :+ 256, t.c * 64 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 256 :+ 256, t.c * 64 :+ 64], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
