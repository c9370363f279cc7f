# dataflow-bench (held out: do not tune the verifier on this file): one-line bug
# base: tma-copy/sm_90a-f32-64x32-s4-sw128
# edit: line 40 (line 34 of the base case)
#   before: tma_store_wait(0)
#   after:  tma_store_wait(1)
# class: visibility: tma_store_wait(1) before release: the stage is refilled while its TMA store may still read it
# TMA tile copy on sm_90a: B = A, f32[R, C], moved box by box (64×32, 128B swizzle) through a
# 4-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_f32_sm_90a_64x32_s4_sw128 target sm_90a

dim R multiple_of 64
dim C multiple_of 32

in A: f32[R, C] tma [64, 32] swizzle 128B
out B: f32[R, C] tma [64, 32] swizzle 128B

grid tiles[r = R / 64, c = C / 32] persistent

smem ring: f32[64, 32] stages 4 swizzle 128B align 1024

role load: warp 0
role store: warp 1

pipeline ab: stages 4 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 64 :+ 64, t.c * 32 :+ 32], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 64 :+ 64, t.c * 32 :+ 32], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(1)
        release(ab)
    }
}
