# seeded failure benchmark, class block-threads (probe; ablates V202): a LEGAL probe just inside the boundary
# base: tma-copy/sm_90a-bf16-64x64-s2-sw128
# edit: line(s) 24 (line(s) 18 of the base case)
#   before: role store: warp 1
#   after:  role store: warp 31
# the store role at the last warp: exactly 1024 threads
# TMA tile copy on sm_90a: B = A, bf16[R, C], moved box by box (64×64, 128B swizzle) through a
# 2-stage shared-memory ring without touching registers: one producer warp issues TMA loads into the
# ring, one store warp waits for a full stage, issues the TMA store from it and hands the stage back
# once the store has read it. The device-copy ceiling benchmark, and the skeleton of every TMA epilogue.
kernel tma_copy_bf16_sm_90a_64x64_s2_sw128 target sm_90a

dim R multiple_of 64
dim C multiple_of 64

in A: bf16[R, C] tma [64, 64] swizzle 128B
out B: bf16[R, C] tma [64, 64] swizzle 128B

grid tiles[r = R / 64, c = C / 64] persistent

smem ring: bf16[64, 64] stages 2 swizzle 128B align 1024

role load: warp 0
role store: warp 31

pipeline ab: stages 2 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring[ab.stage], A[t.r * 64 :+ 64, t.c * 64 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 64 :+ 64, t.c * 64 :+ 64], ring[ab.stage])
        # The stage may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
