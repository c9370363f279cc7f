# expect: syntax error: unexpected `;` (statements end at a newline; Cake has no semicolons)
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B

grid tiles[m = M / 128]

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab);
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab);
        }
    }
}
