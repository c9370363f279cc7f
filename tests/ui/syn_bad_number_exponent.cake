# expect: syntax error: malformed float literal `2.5e` (exponent without digits)
kernel scale target sm_90a

dim N multiple_of 128

in X: f32[N]
out Y: f32[N]

grid tiles[n = N / 128]

role all: warpgroup 0

on all {
    reg x: f32[128] per warpgroup
    for t in tiles {
        load(x, X[t.n * 128 :+ 128])
        store(Y[t.n * 128 :+ 128], x * 2.5e)
    }
}
