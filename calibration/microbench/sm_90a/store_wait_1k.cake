# TMA store wait probe (calibration/microbench/sm_90a/README.md, bench `store-wait`): for every tile
# of the grid, a producer warp TMA-loads the one 32x16 bf16 tile of A (1 KiB, L2-resident
# after the first block) into a 2-stage ring, and a store warp TMA-stores it to the tile's place
# in B and waits for the store to have read shared memory (`tma_store_wait(0)`) before it
# releases the stage. No DRAM reads, no shared-memory work: the store warp's path is the hand-off,
# the store issue and the wait. The 1 KiB and 16 KiB probes separate the wait's fixed part from
# its part per byte in flight.
kernel probe_store_wait_1k target sm_90a

dim R multiple_of 32
dim C multiple_of 16

in A: bf16[32, 16] tma [32, 16]
out B: bf16[R, C] tma [32, 16]

grid tiles[r = R / 32, c = C / 16] persistent

smem tile_s: bf16[32, 16] stages 2

role load: warp 0
role store: warp 1

pipeline ab: stages 2 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(tile_s[ab.stage], A[0 :+ 32, 0 :+ 16], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 32 :+ 32, t.c * 16 :+ 16], tile_s[ab.stage])
        tma_store_wait(0)
        release(ab)
    }
}
