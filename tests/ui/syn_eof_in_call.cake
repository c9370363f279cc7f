# expect: syntax error: unexpected end of file inside the call `wgmma(` (file has no trailing newline)
kernel gemm_bf16_ws target sm_90a

dim K multiple_of 64

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on mma {
    reg acc: f32[64, 256] per warpgroup
    for kb in 0..K / 64 {
        wait(ab)
        wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64],