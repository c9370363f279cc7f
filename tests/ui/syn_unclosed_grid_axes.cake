# expect: syntax error: expected `]` to close the tile-space axes of `tiles`, found `persistent`
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim N multiple_of 256

out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256 persistent

role mma: warpgroup 1..3 regs 232
