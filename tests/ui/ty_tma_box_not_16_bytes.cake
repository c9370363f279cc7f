# expect: type error: the TMA boxes of `A` and `B` are 4 bf16 (8 bytes) wide; a box row must be a multiple of 16 bytes
# TMA tile copy on sm_120a: B = A, bf16[R, C], moved box by box (64×64, 128B swizzle) through a
# 4-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_bf16_sm_120a_64x64_s4_sw128 target sm_120a

dim R multiple_of 64
dim C multiple_of 4

in A: bf16[R, C] tma [64, 4]
out B: bf16[R, C] tma [64, 4]

grid tiles[r = R / 64, c = C / 4] persistent

smem ring: bf16[64, 4] stages 4 align 1024

role load: warp 0
role store: warp 1

pipeline ab: stages 4 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 64 :+ 64, t.c * 4 :+ 4], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 64 :+ 64, t.c * 4 :+ 4], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
