# expect: syntax error: `out` is a keyword and cannot name a role
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim N multiple_of 256

out C: bf16[M, N]

role load: warpgroup 0 regs 40
role out: warpgroup 1..3 regs 232
