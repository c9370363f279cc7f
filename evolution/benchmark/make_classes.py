#!/usr/bin/env python3
"""Regenerate the seeded failure benchmark's ablation classes (evolution/benchmark/, issue 12).

Every program is ONE realistic edit of a corpus case: the case's program is taken from
`cake corpus show FAMILY/CASE`, each edited line (numbered in that program) must contain `old`
exactly once, and `old` is replaced by `new`. An edit is one change; a stage count, which a
pipeline and each of its buffers declare, is changed on all of those lines together (they must
agree, V401). A header of HEADER_LINES comment lines is put in front, so an edited line of the
saved file is `line + HEADER_LINES`. The workload is the case's effective `[workload]`
(`cake corpus show --manifest`, family defaults merged with the instance's overrides).

    python3 evolution/benchmark/make_classes.py [--cake PATH] [--build]

writes <class>/{train,heldout,probe}/<family>--<slug>.cake + .workload.toml, manifest.toml and classes.toml,
and FAILS (exit 1) when a program has an E-code (it must type-check), when a train/heldout
program's full-verifier error codes are not the class's codes (exactly them, or for a class with
`subset` a non-empty subset of them), or when a probe gets any verifier error. With --build it
also builds every train/heldout program with `cake build --unsafe-skip-verify` (toolchain from
scripts/common.sh) and fails unless each gives its class's `build` result: "pass" for the
classes whose failure shows on the GPU, the refusing stage's code for the others (a probe must
build); the results go into manifest.toml. It also fails if an edit repeats one of
verify-benchmark/dataflow/'s (same base case and replacement): that benchmark is held out.
"""
import argparse
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER_LINES = 6

# name: (ablated rules, subset?, gpu?, build, what). `subset`: a program may be rejected by any
# non-empty subset of the codes (tile-coverage's three rules are one bug class: one tile-space
# bug can leave rows unwritten and make two tiles write others). `gpu`: the failure is only
# observable on the GPU (launch/encode error, wrong answer). `build`: what
# `cake build --unsafe-skip-verify` must give: "pass" (it builds, the failure shows on the GPU)
# or the code that refuses it without the verifier (measured with make_classes.py --build: today
# the lowering itself refuses a block over 1024 threads, L002, and a setmaxnreg budget outside
# 24..256 or not a multiple of 8, L003, before ptxas sees it).
CLASSES = {
    "smem-capacity": (["V201"], False, True, "pass",
                      "shared memory over the per-block limit (more stages, bigger tiles): the launch fails"),
    "block-threads": (["V202"], False, False, "L002",
                      "more than 1024 threads per block (a role placed at warpgroup 8, a warp range written as warpgroups): the launch would fail; the lowering refuses it first (L002)"),
    "setmaxnreg-range": (["V204"], False, False, "L003",
                         "a role's setmaxnreg budget outside 24..256: ptxas would reject the immediate; the lowering refuses it first (L003)"),
    "setmaxnreg-multiple": (["V205"], False, False, "L003",
                            "a role's setmaxnreg budget not a multiple of 8: ptxas would reject the immediate; the lowering refuses it first (L003)"),
    "tma-box-range": (["V211"], False, True, "pass",
                      "a TMA box extent over 256 (or 0): cuTensorMapEncodeTiled refuses the descriptor"),
    "tma-inner-box-16b": (["V212"], False, True, "pass",
                          "a TMA box whose innermost extent is not a multiple of 16 B: cuTensorMapEncodeTiled refuses the descriptor"),
    "operand-rows": (["V325"], False, True, "pass",
                     "a feeding read at other rows, batch, group or warp than the store it feeds: a wrong answer"),
    "tile-coverage": (["V320", "V321", "V323"], True, True, "pass",
                      "a multiple_of too weak for a tile, a tile space over part of the output, two writers of one element: a wrong answer"),
    "fills-overlap": (["V328"], False, True, "pass",
                      "sibling TMA fills of one stage on the same bytes (overlapping views, two boxes into one view): a wrong answer"),
}


def stages(lines, old, new):
    """One stage-count change applied to every line that declares it."""
    return [(l, old, new) for l in lines]


# (class, split, case, [(line, old, new), ...], slug, what, shapes-override)
PROGRAMS = [
    # ---------------- smem-capacity (V201)
    ("smem-capacity", "train", "gemm-sm90-ws/bf16-128x256-s4", stages([17, 18, 24], "stages 4", "stages 5"),
     "five-stages", "a fifth 48 KB stage of the 128x256 tiles: 246 KB of shared memory", None),
    ("smem-capacity", "train", "kmeans-assign/d256-128x128-s2-p", stages([21, 22, 28], "stages 2", "stages 3"),
     "three-centroid-stages", "a third 64 KB centroid stage next to the 64 KB point tile", None),
    ("smem-capacity", "train", "tma-copy/sm_90a-bf16-256x64-s3-sw128", stages([15, 20], "stages 3", "stages 8"),
     "eight-stages", "an 8-stage ring of 32 KB boxes for more bytes in flight", None),
    ("smem-capacity", "train", "gemm-batched/bf16-128x256-s4-p", stages([18, 19, 24], "stages 4", "stages 6"),
     "six-stages", "six 48 KB stages of the 128x256 batched tiles", None),
    ("smem-capacity", "heldout", "attention-fwd/bf16-hd128-q128-s3-p", stages([24, 25, 34], "stages 3", "stages 6"),
     "six-kv-stages", "six K/V stages beside the Q and P tiles", None),
    ("smem-capacity", "heldout", "knn-topk/d256-128x128-s2-p", stages([24, 25, 31], "stages 2", "stages 3"),
     "three-database-stages", "a third 64 KB database stage next to the 64 KB query tile", None),
    ("smem-capacity", "heldout", "gemm-sm90-splitn/bf16-64x256-s5", stages([18, 19, 24], "stages 5", "stages 6"),
     "six-stages", "a sixth 40 KB stage of the 64x256 split-N tiles", None),
    ("smem-capacity", "heldout", "kmeans-update/128x256-s3-p", stages([22, 23, 28], "stages 3", "stages 5"),
     "five-stages", "five 48 KB stages of the one-hot GEMM", None),
    ("smem-capacity", "probe", "gemm-sm90-ws/bf16-128x128-s6", stages([17, 18, 24], "stages 6", "stages 7"),
     "seven-stages", "seven 32 KB stages: 230512 B, 1936 B under the limit", None),
    ("smem-capacity", "probe", "tma-copy/sm_90a-bf16-256x64-s3-sw128", stages([15, 20], "stages 3", "stages 7"),
     "seven-stages", "seven 32 KB boxes: 230512 B, 1936 B under the limit", None),
    # ---------------- block-threads (V202): a role's unit written as warpgroups, or a role put at warpgroup 8
    ("block-threads", "train", "tma-copy/sm_90a-bf16-128x64-s4-sw128", [(18, "warp 1", "warpgroup 8")],
     "store-at-warpgroup-8", "the store role placed at warpgroup 8 (warps 32..35): 1152 threads", None),
    ("block-threads", "train", "tma-copy/sm_90a-f32-128x64-s3-nosw", [(17, "warp 0", "warpgroup 8")],
     "load-at-warpgroup-8", "the load role placed at warpgroup 8, after the store warp: 1152 threads", None),
    ("block-threads", "train", "smem-view/bf16-128x64-sw128", [(21, "warp 1", "warpgroup 8")],
     "store-at-warpgroup-8", "the store role placed at warpgroup 8: 1152 threads", None),
    ("block-threads", "train", "smem-view/f32-128x16-sw64", [(20, "warp 0", "warpgroup 8")],
     "load-at-warpgroup-8", "the load role placed at warpgroup 8: 1152 threads", None),
    ("block-threads", "heldout", "tma-transpose/sm_90a-f32-64x64-s2-w8", [(20, "warp 4..12", "warpgroup 4..12")],
     "xpose-warpgroups-f32", "the transposing warps' range written in warpgroups: warpgroups 4..11, 1536 threads", None),
    ("block-threads", "heldout", "tma-transpose/sm_90a-f16-64x64-s3-w8", [(20, "warp 4..12", "warpgroup 4..12")],
     "xpose-warpgroups-f16", "the transposing warps' range written in warpgroups: 1536 threads", None),
    ("block-threads", "heldout", "tma-transpose/sm_90a-bf16-64x64-s2-w4", [(19, "warp 0", "warpgroup 8")],
     "load-at-warpgroup-8", "the load role placed at warpgroup 8, after the transposing warps: 1152 threads", None),
    ("block-threads", "probe", "tma-copy/sm_90a-bf16-64x64-s2-sw128", [(18, "warp 1", "warp 31")],
     "store-at-warp-31", "the store role at the last warp: exactly 1024 threads", None),
    ("block-threads", "probe", "smem-view/f16-128x32-sw64", [(21, "warp 1", "warpgroup 7")],
     "store-at-warpgroup-7", "the store role at warpgroup 7: exactly 1024 threads", None),
    # ---------------- setmaxnreg-range (V204)
    ("setmaxnreg-range", "train", "gemm-sm90-ws/f16-128x64-s5", [(21, "regs 40", "regs 16")],
     "producer-regs-16", "the producer gives back down to 16 registers (setmaxnreg takes 24..256)", None),
    ("setmaxnreg-range", "train", "gemm-sm90-ws/bf16-64x128-s2", [(22, "regs 240", "regs 264")],
     "consumer-regs-264", "the single consumer asks for 264 registers", None),
    ("setmaxnreg-range", "train", "kmeans-assign/d128-64x128-s4", [(25, "regs 240", "regs 272")],
     "consumer-regs-272", "the single consumer asks for 272 registers", None),
    ("setmaxnreg-range", "train", "gemm-batched/bf16-64x64-s6", [(21, "regs 40", "regs 8")],
     "producer-regs-8", "the producer gives back down to 8 registers", None),
    ("setmaxnreg-range", "heldout", "attention-fwd/f16-hd128-q64-s3", [(31, "regs 240", "regs 288")],
     "consumer-regs-288", "the single consumer asks for 288 registers", None),
    ("setmaxnreg-range", "heldout", "knn-topk/d64-64x256-s5", [(27, "regs 40", "regs 16")],
     "producer-regs-16", "the producer gives back down to 16 registers", None),
    ("setmaxnreg-range", "heldout", "kmeans-update/64x64-s2-p", [(26, "regs 240", "regs 264")],
     "consumer-regs-264", "the single consumer asks for 264 registers", None),
    ("setmaxnreg-range", "probe", "gemm-batched/bf16-128x64-s2-p", [(21, "regs 40", "regs 24")],
     "producer-regs-24", "the producer at the lowest budget, 24", None),
    ("setmaxnreg-range", "probe", "attention-fwd/bf16-hd64-q64-s3-p", [(31, "regs 240", "regs 256")],
     "consumer-regs-256", "the single consumer at the highest budget, 256", None),
    # ---------------- setmaxnreg-multiple (V205)
    ("setmaxnreg-multiple", "train", "gemm-sm90-ws/f16-128x128-s4-p", [(21, "regs 40", "regs 36")],
     "producer-regs-36", "the producer's budget 36 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "train", "gemm-sm90-ws/bf16-128x64-s6", [(22, "regs 232", "regs 228")],
     "consumer-regs-228", "the consumers' budget 228 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "train", "kmeans-assign/d64-128x64-s6", [(25, "regs 232", "regs 230")],
     "consumer-regs-230", "the consumers' budget 230 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "train", "gemm-batched/bf16-128x64-s2-p", [(22, "regs 232", "regs 220")],
     "consumer-regs-220", "the consumers' budget 220 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "heldout", "attention-fwd/bf16-hd64-q64-s3-p", [(30, "regs 40", "regs 44")],
     "producer-regs-44", "the producer's budget 44 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "heldout", "knn-topk/d64-64x256-s5", [(28, "regs 240", "regs 250")],
     "consumer-regs-250", "the consumer's budget 250 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "heldout", "gemm-grouped/f16-128x128-s6", [(22, "regs 40", "regs 34")],
     "producer-regs-34", "the producer's budget 34 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "heldout", "gemm-sm90-splitn/bf16-64x128-s4-p", [(22, "regs 160", "regs 164")],
     "consumer-regs-164", "the consumers' budget 164 is not a multiple of 8", None),
    ("setmaxnreg-multiple", "probe", "kmeans-update/64x64-s2-p", [(25, "regs 40", "regs 48")],
     "producer-regs-48", "the producer at 48, a multiple of 8", None),
    ("setmaxnreg-multiple", "probe", "gemm-grouped/bf16-64x256-s2-p", [(23, "regs 240", "regs 248")],
     "consumer-regs-248", "the consumer at 248, a multiple of 8", None),
    # ---------------- tma-box-range (V211): a TMA box declared on a tensor, with an extent over 256
    ("tma-box-range", "train", "kmeans-assign/d128-64x128-s4", [(16, "i32[B, N]", "i32[B, N] tma [1, 512]")],
     "idx-box-512", "the index output declares a 512-wide TMA box", None),
    ("tma-box-range", "train", "gemm-batched/bf16-64x64-s6", [(14, "bf16[BATCH, M, N]", "bf16[BATCH, M, N] tma [1, 64, 320]")],
     "c-box-320", "the output declares a [1, 64, 320] TMA box", None),
    ("tma-box-range", "train", "elementwise/scale-add-sm_90a-bf16-c8192", [(9, "bf16[R, C]", "bf16[R, C] tma [8, 8192]")],
     "x-box-whole-row", "the input declares a box of whole 8192-column rows", None),
    ("tma-box-range", "train", "layernorm/sm_90a-bf16-c8192-w8x1", [(13, "f32[C]", "f32[C] tma [8192]")],
     "gain-box-whole-vector", "the gain vector declares one 8192-element box", None),
    ("tma-box-range", "heldout", "rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16", [(13, "bf16[R, C]", "bf16[R, C] tma [16, 4096]")],
     "x-box-whole-row", "the input declares a box of whole 4096-column rows", None),
    ("tma-box-range", "heldout", "knn-topk/d64-64x256-s5", [(15, "f32[B, NQ]", "f32[B, NQ] tma [1, 1024]")],
     "qnorm-box-1024", "the query-norm vector declares a 1024-wide box", None),
    ("tma-box-range", "heldout", "attention-fwd/f16-hd128-q64-s3", [(19, "f16[BH, S, HD]", "f16[BH, S, HD] tma [1, 512, 64]")],
     "o-box-512-rows", "the output declares a box of 512 query rows", None),
    ("tma-box-range", "probe", "kmeans-assign/d64-128x64-s6", [(16, "i32[B, N]", "i32[B, N] tma [1, 256]")],
     "idx-box-256", "the index output declares a 256-wide box, the largest extent", None),
    ("tma-box-range", "probe", "elementwise/scale-add-sm_90a-bf16-c8192", [(9, "bf16[R, C]", "bf16[R, C] tma [8, 256]")],
     "x-box-256", "the input declares an [8, 256] box", None),
    # ---------------- tma-inner-box-16b (V212)
    ("tma-inner-box-16b", "train", "kmeans-assign/d128-64x128-s4", [(16, "i32[B, N]", "i32[B, N] tma [1, 66]")],
     "idx-box-66", "the index output's box is 66 i32 wide: 264 B", None),
    ("tma-inner-box-16b", "train", "gemm-batched/bf16-128x64-s2-p", [(14, "bf16[BATCH, M, N]", "bf16[BATCH, M, N] tma [1, 64, 60]")],
     "c-box-60-cols", "the output's box is 60 bf16 columns wide: 120 B", None),
    ("tma-inner-box-16b", "train", "elementwise/scale-add-sm_90a-bf16-c8192", [(10, "bf16[R, C]", "bf16[R, C] tma [8, 4]")],
     "y-box-4-cols", "the second input's box is 4 bf16 columns wide: 8 B", None),
    ("tma-inner-box-16b", "train", "layernorm/sm_90a-bf16-c8192-w8x1", [(14, "f32[C]", "f32[C] tma [6]")],
     "bias-box-6", "the bias vector's box is 6 f32: 24 B", None),
    ("tma-inner-box-16b", "heldout", "rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16", [(13, "bf16[R, C]", "bf16[R, C] tma [8, 12]")],
     "x-box-12-cols", "the input's box is 12 bf16 columns wide: 24 B", None),
    ("tma-inner-box-16b", "heldout", "knn-topk/d64-64x256-s5", [(15, "f32[B, NQ]", "f32[B, NQ] tma [1, 2]")],
     "qnorm-box-2", "the query-norm vector's box is 2 f32: 8 B", None),
    ("tma-inner-box-16b", "heldout", "attention-fwd/f16-hd128-q64-s3", [(19, "f16[BH, S, HD]", "f16[BH, S, HD] tma [1, 64, 36]")],
     "o-box-36-cols", "the output's box is 36 f16 columns wide: 72 B", None),
    ("tma-inner-box-16b", "heldout", "kmeans-update/64x64-s2-p", [(17, "f32[B, K]", "f32[B, K] tma [1, 6]")],
     "icnt-box-6", "the 1/count vector's box is 6 f32: 24 B", None),
    ("tma-inner-box-16b", "probe", "kmeans-assign/d64-128x64-s6", [(16, "i32[B, N]", "i32[B, N] tma [1, 4]")],
     "idx-box-4", "the index output's box is 4 i32: exactly 16 B", None),
    ("tma-inner-box-16b", "probe", "gemm-batched/bf16-64x64-s6", [(14, "bf16[BATCH, M, N]", "bf16[BATCH, M, N] tma [1, 64, 8]")],
     "c-box-8-cols", "the output's box is 8 bf16 columns: exactly 16 B", None),
    # ---------------- operand-rows (V325): a feeding read at another batch, tile, row or warp than its store
    ("operand-rows", "train", "gemm-batched/f16-128x128-s5-p", [(31, "B[t.b, ", "B[0, ")],
     "b-ignores-batch", "B is always read from batch 0", None),
    ("operand-rows", "train", "kmeans-assign/d128-64x128-s4", [(34, "X[t.b, ", "X[0, ")],
     "x-ignores-batch", "the point tile is always read from batch 0", None),
    ("operand-rows", "train", "elementwise/scale-add-sm_90a-bf16-c8192", [(23, "Y[t.r * 8", "Y[(t.r + 1) * 8")],
     "y-next-tile", "the second input is read one 8-row tile below the row stored", None),
    ("operand-rows", "train", "rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16", [(25, "rows.warp * 2 + i", "rows.warp * 2")],
     "x-ignores-row-loop", "the row read ignores the per-warp row loop: each warp's second row normalizes its first", None),
    ("operand-rows", "train", "gemm-sm90-ws/bf16-128x128-s2", [(30, "A[t.m * 128", "A[t.m * 64")],
     "a-tile-stride-64", "A's box is taken with a 64-row tile stride for 128-row tiles", None),
    ("operand-rows", "heldout", "attention-fwd/bf16-hd128-q64-s2", [(47, "VT[t.b, ", "VT[0, ")],
     "v-ignores-head", "V is always read from head 0", None),
    ("operand-rows", "heldout", "knn-topk/d256-128x64-s3-p", [(53, "t.q * 128 + mma.warpgroup", "t.q * 64 + mma.warpgroup")],
     "qnorm-tile-stride-64", "the query-norm vector is indexed with a 64-row tile stride for 128-query tiles", None),
    ("operand-rows", "heldout", "softmax/sm_90a-f16-c2048-w8x2", [(32, "rows.warp * 2 + i", "rows.warp + i")],
     "second-pass-warp-stride-1", "the normalizing pass reads with a warp stride of 1 for 2-row warps", None),
    ("operand-rows", "heldout", "kmeans-update/64x256-s4-p", [(52, "ICNT[t.b, t.k * 256", "ICNT[t.b, t.k * 128")],
     "icnt-tile-stride-128", "the 1/count vector is indexed with a 128 stride for 256-centroid tiles", None),
    ("operand-rows", "heldout", "row-reduce/absmax-sm_90a-bf16-c4096-w4x2", [(23, "rows.warp * 2 + i,", "rows.warp * 2 + i + 1,")],
     "x-next-row", "the reduced row is read one row below the row stored", None),
    ("operand-rows", "probe", "elementwise/scale-add-sm_90a-bf16-c8192", [(22, "t.r * 8 + rows.warp * 1 + i", "t.r * 8 + i + rows.warp")],
     "x-index-reordered", "the same row written as t.r * 8 + i + rows.warp: still the stored row", None),
    ("operand-rows", "probe", "knn-topk/d64-64x256-s5", [(53, "t.q * 64 + mma.warpgroup * 64", "mma.warpgroup * 64 + t.q * 64")],
     "qnorm-index-reordered", "the query-norm window written warpgroup-first: still the stored rows", None),
    ("operand-rows", "probe", "layernorm/sm_90a-bf16-c8192-w8x1", [(26, "rows.warp * 1 + i", "(rows.warp + i)")],
     "x-index-grouped", "the row index grouped as t.r * 8 + (rows.warp + i): still the stored row", None),
    # ---------------- tile-coverage (V320, V321, V323)
    ("tile-coverage", "train", "kmeans-update/128x64-s5", [(13, "multiple_of 128", "multiple_of 64")],
     "multiple-of-too-weak", "D multiple_of 64 with 128-row tiles: D = 192 leaves its last 64 rows unwritten",
     [{"B": 2, "D": 128, "K": 256, "N": 1024}, {"B": 2, "D": 192, "K": 256, "N": 1024}]),
    ("tile-coverage", "train", "gemm-batched/bf16-128x64-s2-p", [(16, "m = M / 128", "m = M / 256")],
     "tile-space-half-m", "an M tile axis of M/256 for 128-row tiles", None),
    ("tile-coverage", "train", "elementwise/swiglu-sm_90a-bf16-c4096", [(21, "0..2", "0..4")],
     "row-loop-4-of-2", "each 2-row warp loops over 4 rows: warps write each other's rows and the next tile's", None),
    ("tile-coverage", "train", "layernorm/sm_90a-f32-c2048-w4x4-p", [(25, "0..4", "0..3")],
     "row-loop-one-fewer", "each 4-row warp loops over 3 rows: every fourth row is never written", None),
    ("tile-coverage", "train", "kmeans-assign/d64-64x64-s3-p", [(18, "n = N / 64", "n = N / 128")],
     "tile-space-half-n", "a point tile axis of N/128 for 64-point tiles", None),
    ("tile-coverage", "heldout", "knn-topk/d64-64x256-s5", [(10, "multiple_of 64", "multiple_of 32")],
     "multiple-of-too-weak", "NQ multiple_of 32 with 64-query tiles: NQ = 288 drops its last 32 queries",
     [{"B": 2, "K": 2048, "NQ": 256}, {"B": 2, "K": 2048, "NQ": 288}]),
    ("tile-coverage", "heldout", "gemm-grouped/f16-128x128-s6", [(9, "multiple_of 128", "multiple_of 64")],
     "multiple-of-too-weak", "MG multiple_of 64 with 128-row tiles: MG = 192 drops 64 rows of every group",
     [{"G": 4, "K": 128, "MG": 256, "N": 256}, {"G": 3, "K": 320, "MG": 192, "N": 512}]),
    ("tile-coverage", "heldout", "attention-fwd/f16-hd64-q64-s2-p", [(21, "q = S / 64", "q = S / 128")],
     "tile-space-half-q", "a query tile axis of S/128 for 64-query tiles", None),
    ("tile-coverage", "heldout", "tma-transpose/sm_90a-bf16-32x32-s4-w4", [(14, "c = C / 32", "c = C / 64")],
     "tile-space-half-c", "a column tile axis of C/64 for 32-column tiles", None),
    ("tile-coverage", "heldout", "softmax/sm_90a-f16-c2048-w8x2", [(22, "0..2", "0..3")],
     "row-loop-3-of-2", "each 2-row warp loops over 3 rows: warps write each other's rows", None),
    ("tile-coverage", "heldout", "tma-copy/sm_90a-f8e4m3-128x128-s4-sw128", [(7, "multiple_of 128", "multiple_of 64")],
     "multiple-of-too-weak", "R multiple_of 64 with 128-row boxes: R = 832 drops its last 64 rows",
     [{"C": 1024, "R": 1024}, {"C": 1280, "R": 832}]),
    ("tile-coverage", "probe", "kmeans-assign/d64-64x64-s3-p", [(9, "multiple_of 64", "multiple_of 128")],
     "multiple-of-stronger", "N multiple_of 128 with 64-point tiles: a stronger divisor, still exact", None),
    ("tile-coverage", "probe", "gemm-sm90-ws/bf16-64x256-s4", [(8, "multiple_of 256", "multiple_of 512")],
     "multiple-of-stronger", "N multiple_of 512 with 256-column tiles: a stronger divisor, still exact",
     [{"K": 512, "M": 512, "N": 512}, {"K": 384, "M": 1024, "N": 1536}]),
    # ---------------- fills-overlap (V328): the views exist only in the smem-view family, so the held-out
    # programs are other cases of it (and mix both edit kinds)
    ("fills-overlap", "train", "smem-view/bf16-256x64-sw128", [(18, "offset 16384", "offset 8192")],
     "bf16-256x64-bottom-offset-half", "the bottom view starts halfway into the top one (8192 for a 16384-B half)", None),
    ("fills-overlap", "train", "smem-view/f32-128x16-sw64", [(18, "offset 4096", "offset 0")],
     "f32-128x16-bottom-offset-0", "the bottom view is declared at offset 0, on the top one", None),
    ("fills-overlap", "train", "smem-view/bf16-64x16-sw32", [(29, "tma_load(bottom,", "tma_load(top,")],
     "bf16-64x16-bottom-box-into-top", "the second box is loaded into the top view", None),
    ("fills-overlap", "train", "smem-view/f8e4m3-128x128-sw128", [(18, "offset 8192", "offset 4096")],
     "f8e4m3-128x128-bottom-offset-half", "the bottom view starts halfway into the top one", None),
    ("fills-overlap", "heldout", "smem-view/bf16-128x64-sw128", [(29, "tma_load(bottom,", "tma_load(top,")],
     "bf16-128x64-bottom-box-into-top", "the second box is loaded into the top view", None),
    ("fills-overlap", "heldout", "smem-view/f32-64x32-sw128", [(17, "offset 0", "offset 4096")],
     "f32-64x32-top-offset-of-bottom", "the top view is declared at the bottom one's offset", None),
    ("fills-overlap", "heldout", "smem-view/f16-128x32-sw64", [(18, "offset 4096", "offset 1024")],
     "f16-128x32-bottom-offset-quarter", "the bottom view starts a quarter into the top one", None),
    ("fills-overlap", "heldout", "smem-view/f32-64x64-nosw", [(28, "tma_load(top,", "tma_load(bottom,")],
     "f32-64x64-top-box-into-bottom", "the first box is loaded into the bottom view", None),
    ("fills-overlap", "probe", "smem-view/bf16-128x64-sw128", [(18, "offset 8192", "offset 64 * 64 * 2")],
     "bf16-128x64-bottom-offset-expression", "the bottom view's offset written as 64 * 64 * 2: still exactly past the top one", None),
    ("fills-overlap", "probe", "smem-view/f16-128x32-sw64", [(28, "tma_load(top, A[t.r * 128 :+ 64", "tma_load(bottom, A[t.r * 128 + 64 :+ 64"),
                                                          (29, "tma_load(bottom, A[t.r * 128 + 64 :+ 64", "tma_load(top, A[t.r * 128 :+ 64")],
     "f16-128x32-fills-reordered", "the two fills issued bottom first: still disjoint bytes", None),
]


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def sh(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)


def toolchain_env():
    """The environment scripts/common.sh's cake_use_toolchain sets (NVRTC/ptxas for `cake build`)."""
    out = sh(["bash", "-c", ". scripts/common.sh && cake_use_toolchain >/dev/null && env -0"])
    if out.returncode != 0:
        sys.exit(f"cake_use_toolchain failed: {out.stderr}")
    return dict(kv.split("=", 1) for kv in out.stdout.split("\0") if "=" in kv)


def build(cake, path, env):
    """`cake build --unsafe-skip-verify`: "pass", or the code of the stage that refused it (the lowering's L-code,
    or the compiler's), the verifier's own V-codes skipped (they are reported but bypassed)."""
    with tempfile.TemporaryDirectory() as d:
        r = sh([cake, "build", "--unsafe-skip-verify", "-o", d, path], env=env)
    if r.returncode == 0:
        return "pass"
    codes = [c for c in re.findall(r"^error\[(\w+)\]", r.stderr, re.M) if not c.startswith("V")]
    return codes[-1] if codes else "fail"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cake", default=os.environ.get("CAKE_BIN", "target/debug/cake"))
    ap.add_argument("--build", action="store_true", help="also build every program with the verifier bypassed and check the class's build result")
    a = ap.parse_args()
    cake = os.path.abspath(os.path.join(ROOT, a.cake)) if not os.path.isabs(a.cake) else a.cake
    env = toolchain_env() if a.build else None
    # verify-benchmark/dataflow/ is the verifier's held-out benchmark: no program here may repeat one of
    # its edits (same base case, same replacement).
    sys.path.insert(0, os.path.join(ROOT, "verify-benchmark", "dataflow"))
    sys.dont_write_bytecode = True
    import make_bugs
    held = {(b[0], b[2], b[3]) for b in make_bugs.BUGS}
    for cls, split, case, edits, slug, _, _ in PROGRAMS:
        for _, old, new in edits:
            if (case, old, new) in held:
                sys.exit(f"{cls}/{split}/{slug}: repeats an edit of verify-benchmark/dataflow/ on {case} ({old!r} -> {new!r})")
    for cls in CLASSES:
        shutil.rmtree(os.path.join(HERE, cls), ignore_errors=True)
    seen, entries, bad = set(), [], 0
    for cls, split, case, edits, slug, what, shapes in PROGRAMS:
        ablate, subset, gpu, want_build, _ = CLASSES[cls]
        family = case.split("/")[0]
        stem = f"{family}--{slug}"
        rel = f"{cls}/{split}/{stem}"
        assert rel not in seen, rel
        seen.add(rel)
        prog = sh([cake, "corpus", "show", case])
        if prog.returncode != 0:
            sys.exit(f"{case}: {prog.stderr}")
        lines = prog.stdout.split("\n")
        befores, afters = [], []
        for line, old, new in edits:
            before = lines[line - 1]
            if before.count(old) != 1:
                sys.exit(f"{rel}: line {line} of {case} does not contain {old!r} once: {before!r}")
            lines[line - 1] = before.replace(old, new)
            befores.append(before.strip())
            afters.append(lines[line - 1].strip())
        nums = ", ".join(str(l + HEADER_LINES) for l, _, _ in edits)
        base_nums = ", ".join(str(l) for l, _, _ in edits)
        header = [
            f"# seeded failure benchmark, class {cls} ({split}; ablates {', '.join(ablate)}): "
            + ("a LEGAL probe just inside the boundary" if split == "probe" else "one edit"),
            f"# base: {case}",
            f"# edit: line(s) {nums} (line(s) {base_nums} of the base case)",
            f"#   before: {' | '.join(befores)}",
            f"#   after:  {' | '.join(afters)}",
            f"# {what}",
        ]
        assert len(header) == HEADER_LINES
        os.makedirs(os.path.join(HERE, cls, split), exist_ok=True)
        path = os.path.join(HERE, rel + ".cake")
        with open(path, "w") as f:
            f.write("\n".join(header + lines))
        man = tomllib.loads(sh([cake, "corpus", "show", "--manifest", case]).stdout)
        wl = dict(man["workload"])
        if shapes is not None:
            wl["shapes"] = shapes
        with open(os.path.join(HERE, rel + ".workload.toml"), "w") as f:
            f.write(f"# Workload of {stem}.cake: the effective [workload] of {case}"
                    + (" with shapes allowed by the edited `multiple_of`" if shapes else "") + ".\n")
            for k, v in wl.items():
                f.write(f"{k} = {toml_value(v)}\n")
        chk = sh([cake, "check", "--message-format", "json", path])
        ds = [json.loads(l) for l in chk.stdout.splitlines() if l.startswith("{")]
        errors = sorted({d["code"] for d in ds if d.get("severity") == "error"})
        problem = None
        if any(c.startswith("E") for c in errors):
            problem = f"E-codes {errors}"
        elif split == "probe":
            if errors:
                problem = f"the probe is rejected: {errors}"
        elif not errors:
            problem = "the full verifier accepts it"
        elif subset and not set(errors) <= set(ablate):
            problem = f"codes {errors} are not a subset of {ablate}"
        elif not subset and errors != sorted(ablate):
            problem = f"codes {errors}, expected exactly {ablate}"
        built = None
        if a.build and problem is None:
            built = build(cake, path, env)
            want = "pass" if split == "probe" else want_build
            if built != want:
                problem = f"`cake build --unsafe-skip-verify` gives {built}, expected {want}"
        if problem:
            bad += 1
            print(f"FAIL {rel}: {problem}\n{chk.stdout}", file=sys.stderr)
        lines_saved = [l + HEADER_LINES for l, _, _ in edits]
        entries.append(dict(file=rel + ".cake", workload=rel + ".workload.toml", cls=cls, split=split, family=family, base=case,
                            lines=lines_saved, base_lines=[l for l, _, _ in edits], codes=errors, what=what, built=built))
        b = "" if built is None else f" build={built}"
        print(f"{rel:75} {','.join(errors) or '-'}{b}")
    with open(os.path.join(HERE, "manifest.toml"), "w") as f:
        f.write("# The seeded failure benchmark's ablation programs (see README.md). One [[program]] per file:\n"
                "# `codes` are today's full-verifier error codes (none for a probe); `lines` the edited lines of\n"
                "# `file`; `build` the `cake build --unsafe-skip-verify` result. Generated by make_classes.py.\n")
        for e in entries:
            f.write(f"\n[[program]]\nfile = \"{e['file']}\"\nworkload = \"{e['workload']}\"\nclass = \"{e['cls']}\"\n"
                    f"split = \"{e['split']}\"\nfamily = \"{e['family']}\"\nbase = \"{e['base']}\"\nlines = {toml_value(e['lines'])}\n"
                    f"base_lines = {toml_value(e['base_lines'])}\ncodes = {toml_value(e['codes'])}\nwhat = {toml_value(e['what'])}\n")
            if e["built"] is not None:
                f.write(f"build = {toml_value(e['built'])}\n")
    counts = {}
    for e in entries:
        counts.setdefault(e["cls"], {}).setdefault(e["split"], 0)
        counts[e["cls"]][e["split"]] += 1
    with open(os.path.join(HERE, "classes.toml"), "w") as f:
        f.write("# The seeded failure benchmark's bug classes (see README.md). One [[class]] per class: `ablate` the\n"
                "# verifier rules removed from the base for it, `source` how its failures are made, `gpu` whether the\n"
                "# failure is only observable on the GPU, `build` what `cake build --unsafe-skip-verify` gives (`pass`,\n"
                "# or the code that refuses it), `subset` whether a program may hit a subset of `ablate`. Generated by\n"
                "# make_classes.py.\n")
        for cls, (ablate, subset, gpu, want_build, what) in CLASSES.items():
            c = counts.get(cls, {})
            f.write(f"\n[[class]]\nname = \"{cls}\"\nablate = {toml_value(ablate)}\nsource = \"ablation\"\ngpu = {toml_value(gpu)}\n"
                    f"build = \"{want_build}\"\nsubset = {toml_value(subset)}\nwhat = {toml_value(what)}\n"
                    f"train = {c.get('train', 0)}\nheldout = {c.get('heldout', 0)}\nprobe = {c.get('probe', 0)}\n")
    for cls in CLASSES:
        c = counts.get(cls, {})
        print(f"{cls:22} train {c.get('train', 0)}  heldout {c.get('heldout', 0)}  probe {c.get('probe', 0)}")
    print(f"{len(entries)} programs; {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
