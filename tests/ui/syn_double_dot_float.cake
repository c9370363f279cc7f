# expect: syntax error: malformed number `1.0.5`
kernel kmeans_assign target sm_90a

dim N multiple_of 128

role mma: warpgroup 1..3 regs 232

on mma {
    reg best_d: f32[64] per warpgroup
    fill(best_d, 1.0.5)
}
