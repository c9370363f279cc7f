# expect: syntax error: the file must start with `kernel NAME target TARGET`, found `dim`
dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

role all: warp 0..4

on all {
    reg acc: f32[64, 64] per warp
    for t in tiles {
        zero(acc)
    }
}
