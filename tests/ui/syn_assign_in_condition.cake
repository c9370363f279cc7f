# expect: syntax error: expected `{` after the `if` condition, found `=` (did you mean `==`?)
kernel gemm_bf16_sm80 target sm_80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] stages 3 swizzle 64B

role all: warp 0..4

on all {
    for t in tiles {
        for kb in 0..K / 32 {
            if kb % 3 = 0 {
                sync()
            }
        }
    }
}
