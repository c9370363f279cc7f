# expect: syntax error: unknown declaration keyword `shared` (did you mean `smem`?)
kernel gemm_bf16_sm80 target sm_80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

shared a_s: bf16[128, 32] stages 3 swizzle 64B
smem b_s: bf16[128, 32] stages 3 swizzle 64B

role all: warp 0..4
