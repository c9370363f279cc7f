# expect: syntax error: expected an expression after `+` at the end of the line
kernel kmeans_assign target sm_90a

dim B
dim K multiple_of 128

smem cn_s: f32[128] stages 4

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline cs: stages 4 producer load consumer mma

on mma {
    reg acc: f32[64, 128] per warpgroup
    for kt in 0..K / 128 {
        wait(cs)
        let d = cn_s[cs.stage] - 2.0 * acc
        release(cs)
        let i = reduce_argmin(d, axis=1) +
    }
}
