# expect: syntax error: unexpected character `$`
kernel gemm_bf16_sm80 target sm_80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] stages 3 swizzle 64B

role all: warp 0..4

on all {
    for t in tiles {
        for s in 0..2 {
            cp_async(a_s[s], A[t.m * 128 :+ 128, $s * 32 :+ 32])
            cp_async_commit()
        }
    }
}
