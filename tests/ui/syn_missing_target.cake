# expect: syntax error: `kernel NAME` must be followed by `target TARGET`
kernel gemm_bf16_sm80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]
