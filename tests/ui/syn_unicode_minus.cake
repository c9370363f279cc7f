# expect: syntax error: unexpected character `−` (U+2212 MINUS SIGN, pasted from a paper); use ASCII `-`
kernel kmeans_assign target sm_90a

dim B
dim K multiple_of 128

in CN: f32[B, K] tma [1, 128]

smem cn_s: f32[128] stages 4

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline cs: stages 4 producer load consumer mma

on mma {
    reg acc: f32[64, 128] per warpgroup
    for kt in 0..K / 128 {
        wait(cs)
        let d = cn_s[cs.stage] − 2.0 * acc
        release(cs)
    }
}
