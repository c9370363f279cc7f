# expect: syntax error: expected the end of the range after `1..` in `warpgroup 1..`, found `regs`
kernel gemm_bf16_ws target sm_90a

role load: warpgroup 0 regs 40
role mma: warpgroup 1.. regs 232
