# Register-to-global store of a wgmma accumulator tile, cast to bf16 (calibration/microbench/sm_90a/README.md,
# bench `epilogue`). Two warpgroups per SM each hold a 64×256 f32 fragment in the wgmma accumulator layout
# and write it with the GEMM epilogue's store (4-byte stores, 16 contiguous bytes per row and lane quad)
# to every 128×256 tile of C; there are no loads and no tensor-core work, so the write traffic through
# L2 that this store pattern causes is the whole cost.
kernel epilogue_store_n256 target sm_90a

dim M multiple_of 128
dim N multiple_of 256

out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent

role mma: warpgroup 0..2

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        fill(acc, 0.5)
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
