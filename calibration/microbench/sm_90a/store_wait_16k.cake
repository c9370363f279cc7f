# TMA store wait probe (calibration/microbench/sm_90a/README.md, bench `store-wait`): for every tile
# of the grid, a producer warp TMA-loads the one 128x64 bf16 tile of A (16 KiB, L2-resident
# after the first block) into a 2-stage ring, and a store warp TMA-stores it to the tile's place
# in B and waits for the store to have read shared memory (`tma_store_wait(0)`) before it
# releases the stage. No DRAM reads, no shared-memory work: the store warp's path is the hand-off,
# the store issue and the wait. The 1 KiB and 16 KiB probes separate the wait's fixed part from
# its part per byte in flight.
kernel probe_store_wait_16k target sm_90a

dim R multiple_of 128
dim C multiple_of 64

in A: bf16[128, 64] tma [128, 64]
out B: bf16[R, C] tma [128, 64]

grid tiles[r = R / 128, c = C / 64] persistent

smem tile_s: bf16[128, 64] stages 2

role load: warp 0
role store: warp 1

pipeline ab: stages 2 producer load consumer store

on load {
    for t in tiles {
        acquire(ab)
        tma_load(tile_s[ab.stage], A[0 :+ 128, 0 :+ 64], ab)
    }
}

on store {
    for t in tiles {
        wait(ab)
        tma_store(B[t.r * 128 :+ 128, t.c * 64 :+ 64], tile_s[ab.stage])
        tma_store_wait(0)
        release(ab)
    }
}
