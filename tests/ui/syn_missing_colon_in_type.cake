# expect: syntax error: expected `:` after the tensor name `A`, found `bf16`
kernel gemm_bf16_sm80 target sm_80

dim M multiple_of 128
dim K multiple_of 64

in A bf16[M, K]
out C: bf16[M, K]
