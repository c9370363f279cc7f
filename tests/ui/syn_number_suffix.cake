# expect: syntax error: bad number `64k` (a number directly followed by letters; only `B` is a valid suffix)
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim K multiple_of 64k

in A: bf16[M, K] tma [128, 64] swizzle 128B
