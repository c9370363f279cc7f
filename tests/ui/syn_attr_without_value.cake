# expect: syntax error: attribute `align` needs a value (only `persistent` stands alone)
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B

smem a_s: bf16[128, 64] stages 4 swizzle 128B align
smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024
