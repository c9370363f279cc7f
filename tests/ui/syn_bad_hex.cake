# expect: syntax error: malformed integer literal `0x` (no hex digits) in the `align` attribute
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 0x
