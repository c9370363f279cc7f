# V303 (view-swizzle-conflict): the output has a 64B swizzle, so the store reads the buffer through a 64B-swizzled view, but TMA wrote it with the 128B pattern: the tile is scrambled.
# Based on corpus/tma-copy/tma-copy.cake.tmpl (bf16, 128x32, one stage, 128B swizzle) with this one change.
# TMA tile copy on sm_90a: B = A, bf16[R, C], moved box by box (128x32, 128B swizzle) through a
# one-stage shared-memory buffer without touching registers: one producer warp issues TMA loads, one
# store warp waits for the buffer, issues the TMA store from it and hands it back once the store has
# read it.
kernel tma_copy_bf16 target sm_90a

dim R multiple_of 128
dim C multiple_of 32

in A: bf16[R, C] tma [128, 32] swizzle 128B
out B: bf16[R, C] tma [128, 32] swizzle 64B

grid tiles[r = R / 128, c = C / 32] persistent

smem ring: bf16[128, 32] swizzle 128B align 1024
view ring64: bf16[128, 32] of ring offset 0 swizzle 64B

role load: warp 0
role store: warp 1

pipeline ab: stages 1 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(ring, A[t.r * 128 :+ 128, t.c * 32 :+ 32], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 32 :+ 32], ring64)
        # The buffer may be refilled only once the TMA store has finished reading it.
        tma_store_wait(0)
        release(ab)
    }
}
