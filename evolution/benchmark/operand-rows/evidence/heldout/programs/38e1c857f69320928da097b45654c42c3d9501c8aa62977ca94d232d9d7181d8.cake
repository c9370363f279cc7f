# seeded failure benchmark, class operand-rows (heldout; ablates V325): one edit
# base: knn-topk/d256-128x64-s3-p
# edit: line(s) 59 (line(s) 53 of the base case)
#   before: let qn = QN[t.b, t.q * 128 + mma.warpgroup * 64 :+ 64]
#   after:  let qn = QN[t.b, t.q * 64 + mma.warpgroup * 64 :+ 64]
# the query-norm vector is indexed with a 64-row tile stride for 128-query tiles
# Brute-force KNN for Hopper, D = 256: squared L2 distances of 128-query tiles to every database
# vector (‖q‖² + ‖c‖² − 2·q·c, the dot products on the tensor cores), then the first stage of a
# two-stage top-k: for every query the nearest candidate of each 64-vector database tile
# (distance and index). The final k-selection over the K/64 candidates per query is a second
# small kernel (the catalog has no sort or k-select primitive). Database tiles and their norms
# stream through a 3-stage pipeline; 2 consumer warpgroup(s) own 64 queries each.
kernel knn_d256_128x64_s3_p target sm_90a

dim B
dim NQ multiple_of 128
dim K multiple_of 64
const D = 256

in Q: bf16[B, NQ, D] tma [1, 128, 64] swizzle 128B
in QN: f32[B, NQ]
in C: bf16[B, K, D] tma [1, 64, 64] swizzle 128B
in CN: f32[B, K] tma [1, 64]
out Dist: f32[B, NQ, K / 64]
out Idx: i32[B, NQ, K / 64]

grid tiles[b = B, q = NQ / 128] persistent

smem q_s: bf16[4, 128, 64] swizzle 128B align 1024
smem c_s: bf16[4, 64, 64] stages 3 swizzle 128B align 1024
smem cn_s: f32[64] stages 3

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline qp: stages 1 producer load consumer mma
pipeline cs: stages 3 producer load consumer mma

on load {
    for t in tiles {
        acquire(qp)
        for dc in 0..D / 64 {
            tma_load(q_s[dc], Q[t.b, t.q * 128 :+ 128, dc * 64 :+ 64], qp)
        }
        for kt in 0..K / 64 {
            acquire(cs)
            for dc in 0..D / 64 {
                tma_load(c_s[cs.stage, dc], C[t.b, kt * 64 :+ 64, dc * 64 :+ 64], cs)
            }
            tma_load(cn_s[cs.stage], CN[t.b, kt * 64 :+ 64], cs)
        }
    }
}

on mma {
    reg acc: f32[64, 64] per warpgroup
    for t in tiles {
        wait(qp)
        let qn = QN[t.b, t.q * 64 + mma.warpgroup * 64 :+ 64]
        for kt in 0..K / 64 {
            wait(cs)
            zero(acc)
            for dc in 0..D / 64 {
                wgmma(acc, q_s[dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
            }
            wgmma_commit()
            wgmma_wait(0)
            let d = cn_s[cs.stage] - 2.0 * acc
            release(cs)
            store(Dist[t.b, t.q * 128 + mma.warpgroup * 64 :+ 64, kt], reduce_min(d, axis=1) + qn)
            store(Idx[t.b, t.q * 128 + mma.warpgroup * 64 :+ 64, kt], reduce_argmin(d, axis=1) + kt * 64)
        }
        release(qp)
    }
}
