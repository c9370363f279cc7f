# expect: syntax error: `reg` statement at top level; statements belong inside an `on ROLE { }` body
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim N multiple_of 256

out C: bf16[M, N]

role mma: warpgroup 1..3 regs 232

reg acc: f32[64, 256] per warpgroup

on mma {
    zero(acc)
}
