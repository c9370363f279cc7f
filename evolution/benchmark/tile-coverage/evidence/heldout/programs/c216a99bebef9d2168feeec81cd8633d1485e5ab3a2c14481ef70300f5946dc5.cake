# seeded failure benchmark, class tile-coverage (heldout; ablates V320, V321, V323): one edit
# base: tma-copy/sm_90a-f8e4m3-128x128-s4-sw128
# edit: line(s) 13 (line(s) 7 of the base case)
#   before: dim R multiple_of 128
#   after:  dim R multiple_of 64
# R multiple_of 64 with 128-row boxes: R = 832 drops its last 64 rows
# TMA tile copy on sm_90a: B = A, f8e4m3[R, C], moved box by box (128×128, 128B swizzle) through a
# 4-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_f8e4m3_sm_90a_128x128_s4_sw128 target sm_90a

dim R multiple_of 64
dim C multiple_of 128

in A: f8e4m3[R, C] tma [128, 128] swizzle 128B
out B: f8e4m3[R, C] tma [128, 128] swizzle 128B

grid tiles[r = R / 128, c = C / 128] persistent

smem ring: f8e4m3[128, 128] stages 4 swizzle 128B align 1024

role load: warp 0
role store: warp 1

pipeline ab: stages 4 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 128 :+ 128, t.c * 128 :+ 128], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 128 :+ 128], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
