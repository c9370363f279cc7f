# expect: syntax error: expected `]` or `,` in the tensor type `bf16[M, K`, found `tma`
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim K multiple_of 64

in A: bf16[M, K tma [128, 64] swizzle 128B
out C: bf16[M, K]
