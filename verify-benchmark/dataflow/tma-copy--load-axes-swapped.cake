# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: tma-copy/sm_90a-f16-128x32-s6-sw64
# edit: line 31 (line 25 of the base case)
#   before: tma_load(ring[ab.stage], A[t.r * 128 :+ 128, t.c * 32 :+ 32], ab)
#   after:  tma_load(ring[ab.stage], A[t.c * 128 :+ 128, t.r * 32 :+ 32], ab)
# class: index: the load box takes its row from the column tile and its column from the row tile
# TMA tile copy on sm_90a: B = A, f16[R, C], moved box by box (128×32, 64B swizzle) through a
# 6-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_f16_sm_90a_128x32_s6_sw64 target sm_90a

dim R multiple_of 128
dim C multiple_of 32

in A: f16[R, C] tma [128, 32] swizzle 64B
out B: f16[R, C] tma [128, 32] swizzle 64B

grid tiles[r = R / 128, c = C / 32] persistent

smem ring: f16[128, 32] stages 6 swizzle 64B align 512

role load: warp 0
role store: warp 1

pipeline ab: stages 6 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.c * 128 :+ 128, t.r * 32 :+ 32], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 32 :+ 32], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
