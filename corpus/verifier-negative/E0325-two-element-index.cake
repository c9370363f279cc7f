# Rejected: a data-dependent row index that is a 2-element window, not one element
kernel emb_bad target sm_90a

dim R multiple_of 8
const V = 32000
const H = 4096

in Ids: i32[R]
in E: bf16[V, H]
out Out: bf16[R, H]

grid tiles[r = R / 8]

role rows: warp 0..8

on rows {
    for t in tiles {
        let id = Ids[t.r * 8 + rows.warp :+ 2]
        for c in 0..H / 1024 {
            store(Out[t.r * 8 + rows.warp, c * 1024 :+ 1024], E[id, c * 1024 :+ 1024])
        }
    }
}
