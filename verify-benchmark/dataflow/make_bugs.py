#!/usr/bin/env python3
"""Regenerate the held-out data-consistency benchmark (verify-benchmark/dataflow/).

Every bug below is ONE edited line of a corpus case: the case's program is taken from
`cake corpus show FAMILY/CASE`, the line `line` (numbered in that program) must contain `old`
exactly once, and `old` is replaced by `new`. A header of HEADER_LINES comment lines is put in
front, so the edited line of the saved file is `line + HEADER_LINES` (the manifest's `line`).
The workload is the case's effective `[workload]` table (`cake corpus show --manifest`, family
defaults merged with the instance's overrides), with `shapes` replaced where a bug needs a shape
that its edited `multiple_of` allows but the original did not.

    python3 verify-benchmark/dataflow/make_bugs.py [--cake PATH]

writes <family>--<slug>.cake, <family>--<slug>.workload.toml and manifest.toml beside this file,
and fails if any program has an E-code (a type/parse error) under `cake check`.
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER_LINES = 6

# Classes, one per analysis of issue 13's "Deliver" list:
#   coverage      output elements never written / written twice / written outside the tensor
#   index         operand or output index inconsistent with the tile it belongs to (batch, group,
#                 tile axis, warp mapping, next tile, vector indexed by the wrong axis)
#   pass-chunk    passes or chunk loops that do not cover the same chunks / the whole row
#   divisibility  a `multiple_of` too weak for a tile, chunk or box
#   visibility    a shared-memory write read by another warp / the async proxy without the
#                 fence + barrier (or wait) that orders them
#   register-budget  setmaxnreg role budgets that are swapped or wrong
#   view          overlapping views of one region, or a TMA box landing in the wrong view

# (case, line, old, new, slug, class, smem, what, shapes-override)
BUGS = [
    # ---- softmax
    ("softmax/sm_90a-bf16-c32768-w4x1-ch4096", 31, "0..C / 4096", "0..C / 4096 - 1",
     "second-pass-one-chunk-fewer", "pass-chunk", False,
     "the writing pass covers 7 of the 8 chunks the statistics pass read", None),
    ("softmax/sm_90a-f32-c16384-w8x1-ch2048", 25, "0..C / 2048", "0..C / 2048 - 1",
     "first-pass-one-chunk-fewer", "pass-chunk", False,
     "the max/sum pass skips the last chunk that the second pass normalizes", None),
    ("softmax/sm_90a-bf16-c4096-w4x2", 14, "R / 8]", "R / 16]",
     "tile-space-half-rows", "coverage", False,
     "a tile space of R/16 for 8-row tiles: half the rows are never written", None),
    ("softmax/sm_90a-bf16-c1024-w8x4", 33, "Y[t.r * 32 + rows.warp * 4 + i", "Y[t.r * 32 + rows.warp * 2 + i",
     "store-warp-stride-2", "coverage", False,
     "the store uses a warp stride of 2 rows for 4-row warps: rows written twice and rows never written", None),
    ("softmax/sm_90a-bf16-c4096-w4x2", 8, "multiple_of 8", "multiple_of 4",
     "multiple-of-too-weak", "divisibility", False,
     "R multiple_of 4 with 8-row tiles: the last 4 rows of R = 452 are never written",
     [{"R": 64}, {"R": 452}]),
    # ---- elementwise
    ("elementwise/swiglu-sm_90a-bf16-c4096", 24, "rows.warp * 2 + i", "rows.warp + i",
     "warps-overlap-rows", "coverage", False,
     "the store's warp stride is 1 for 2-row warps: warps write overlapping rows", None),
    ("elementwise/geglu-sm_90a-f16-c2048", 14, "R / 16]", "R / 32]",
     "tile-space-half-rows", "coverage", False,
     "a tile space of R/32 for 16-row tiles", None),
    ("elementwise/scale-add-sm_90a-bf16-c8192", 6, "multiple_of 8", "multiple_of 4",
     "multiple-of-too-weak", "divisibility", False,
     "R multiple_of 4 with 8-row tiles: R = 1220 leaves its last 4 rows unwritten",
     [{"R": 64}, {"R": 1220}]),
    ("elementwise/rsqrt-scale-sm_90a-bf16-c512", 23, "rows.warp * 8 + i", "rows.warp * 8 + i + 1",
     "second-input-next-row", "index", False,
     "the second input is read one row below the row being written", None),
    ("elementwise/clamp-mix-sm_90a-f16-c1024", 24, "store(Z[t.r * ", "store(Z[(t.r + 1) * ",
     "store-next-tile", "index", False,
     "the output is stored at the next tile: tile 0 never written, the last tile past the end", None),
    # ---- rmsnorm
    ("rmsnorm/sm_90a-bf16-c4096-w4x2-p", 27, "Y[t.r * 8 ", "Y[(t.r + 1) * 8 ",
     "store-next-tile", "index", False,
     "the normalized row is stored at the next tile's rows", None),
    ("rmsnorm/sm_90a-f16-c2048-w8x4-p", 17, "R / 32]", "R / 64]",
     "tile-space-half-rows", "coverage", False,
     "a persistent tile space of R/64 for 32-row tiles", None),
    ("rmsnorm/sm_90a-f32-c1024-w4x8", 8, "multiple_of 32", "multiple_of 16",
     "multiple-of-too-weak", "divisibility", False,
     "R multiple_of 16 with 32-row tiles: R = 4272 leaves 16 rows unwritten",
     [{"R": 32}, {"R": 4272}]),
    ("rmsnorm/sm_90a-bf16-c8192-w8x1", 25, "rows.warp * 1 + i", "rows.warp * 2 + i",
     "load-warp-stride-2", "index", False,
     "the input row uses a warp stride of 2 for 1-row warps: each warp normalizes another warp's row", None),
    # ---- layernorm
    ("layernorm/sm_90a-f32-c2048-w4x4-p", 17, "R / 16]", "R / 32]",
     "tile-space-half-rows", "coverage", False,
     "a persistent tile space of R/32 for 16-row tiles", None),
    ("layernorm/sm_90a-bf16-c4096-w4x2-p", 30, "rows.warp * 2 + i", "rows.warp + i",
     "warps-overlap-rows", "coverage", False,
     "the store's warp stride is 1 for 2-row warps: overlapping rows, others unwritten", None),
    ("layernorm/sm_90a-f16-c1024-w8x4", 7, "multiple_of 32", "multiple_of 16",
     "multiple-of-too-weak", "divisibility", False,
     "R multiple_of 16 with 32-row tiles: R = 4272 leaves 16 rows unwritten",
     [{"R": 32}, {"R": 4272}]),
    # ---- row-reduce
    ("row-reduce/mean-sm_90a-bf16-c8192-w4x1-ch2048", 22, "0..C / 2048", "0..C / 2048 - 1",
     "chunk-loop-one-fewer", "pass-chunk", False,
     "the chunk loop reads 3 of the row's 4 chunks (then divides by C)", None),
    ("row-reduce/sum-sm_90a-f32-c4096-w8x2-ch1024", 26, "rows.warp * 2 + i :+ 1", "rows.warp * 2 + i + 1 :+ 1",
     "store-next-row", "index", False,
     "each row's sum is stored one row down: row 0 never written, one past the end", None),
    ("row-reduce/max-sm_90a-f16-c2048-w8x4", 13, "R / 32]", "R / 64]",
     "tile-space-half-rows", "coverage", False,
     "a tile space of R/64 for 32-row tiles", None),
    ("row-reduce/min-sm_90a-bf16-c512-w4x8", 7, "multiple_of 32", "multiple_of 16",
     "multiple-of-too-weak", "divisibility", False,
     "R multiple_of 16 with 32-row tiles: R = 1232 leaves 16 rows unwritten",
     [{"R": 64}, {"R": 1232}]),
    ("row-reduce/mean-sm_90a-bf16-c8192-w4x1-ch2048", 23, "c * 2048 :+ 2048", "c * 1024 :+ 2048",
     "chunk-window-stride-half", "pass-chunk", False,
     "chunks of 2048 at a stride of 1024: overlapping chunks, the last half of the row never read", None),
    # ---- tma-copy
    ("tma-copy/sm_90a-bf16-128x64-s4-sw128", 13, "c = C / 64]", "c = C / 128]",
     "tile-space-half-cols", "coverage", False,
     "a column tile space of C/128 for 64-column boxes", None),
    ("tma-copy/sm_90a-f32-64x32-s4-sw128", 34, "tma_store_wait(0)", "tma_store_wait(1)",
     "store-wait-too-shallow", "visibility", True,
     "tma_store_wait(1) before release: the stage is refilled while its TMA store may still read it", None),
    ("tma-copy/sm_90a-bf16-256x64-s3-sw128", 8, "multiple_of 64", "multiple_of 32",
     "multiple-of-too-weak", "divisibility", False,
     "C multiple_of 32 with 64-column boxes: C = 1312 leaves 32 columns unwritten",
     [{"R": 1024, "C": 1024}, {"R": 768, "C": 1312}]),
    ("tma-copy/sm_90a-f16-128x32-s6-sw64", 25, "A[t.r * 128 :+ 128, t.c * 32 :+ 32]", "A[t.c * 128 :+ 128, t.r * 32 :+ 32]",
     "load-axes-swapped", "index", False,
     "the load box takes its row from the column tile and its column from the row tile", None),
    # ---- tma-transpose
    ("tma-transpose/sm_90a-bf16-64x64-s2-w4", 39, "sync_role(xpose)", "sync_role(load)",
     "barrier-of-wrong-role", "visibility", True,
     "the barrier after the fenced column copy names the 1-warp load role: it does not order the 4 xpose warps' writes before the TMA store", None),
    ("tma-transpose/sm_90a-bf16-128x128-s2-w8", 40, "B[t.c * 128 :+ 128, t.r * 128 :+ 128]", "B[t.r * 128 :+ 128, t.c * 128 :+ 128]",
     "store-not-transposed", "index", True,
     "the TMA store uses the untransposed tile coordinates", None),
    ("tma-transpose/sm_90a-f16-64x64-s3-w8", 35, "in_s[ab.stage, :, j]", "in_s[ab.stage, j, :]",
     "copy-reads-rows", "index", True,
     "the shared copy reads row j instead of column j: a copy, not a transpose", None),
    ("tma-transpose/sm_90a-f32-64x64-s2-w8", 14, "r = R / 64,", "r = R / 128,",
     "tile-space-half-rows", "coverage", True,
     "a row tile space of R/128 for 64-row boxes", None),
    # ---- smem-view
    ("smem-view/bf16-128x64-sw128", 18, "offset 8192", "offset 4096",
     "views-overlap", "view", True,
     "the bottom view starts at 4096 bytes, inside the top view (64×64 bf16 = 8192 bytes)", None),
    ("smem-view/f16-128x32-sw64", 29, "tma_load(bottom,", "tma_load(top,",
     "both-boxes-one-view", "view", True,
     "both TMA boxes land in the top view; the bottom half is stored unfilled", None),
    ("smem-view/f32-64x32-sw128", 29, "+ 32 :+ 32", ":+ 32",
     "bottom-box-same-rows", "index", True,
     "the bottom half is loaded from the top half's rows", None),
    ("smem-view/bf16-64x16-sw32", 14, "r = R / 64", "r = R / 128",
     "tile-space-half-rows", "coverage", True,
     "a row tile space of R/128 for 64-row tiles", None),
    ("smem-view/f8e4m3-128x128-sw128", 11, "tma [64, 128]", "tma [128, 128]",
     "box-exceeds-view", "view", True,
     "A's TMA box is the whole 128-row tile while each load lands in a 64-row view", None),
    ("smem-view/f32-64x64-nosw", 18, "offset 8192", "offset 0",
     "bottom-view-aliases-top", "view", True,
     "the bottom view is declared at offset 0: both halves land in the top of the tile", None),
    # ---- gemm-sm90-ws
    ("gemm-sm90-ws/bf16-128x128-s4", 22, "regs 232", "regs 40",
     "consumer-budget-of-producer", "register-budget", False,
     "the consumers' setmaxnreg is the producer's 40: a decrease far below the 64×128 accumulator", None),
    ("gemm-sm90-ws/bf16-128x128-s3-p", 47, "t.n * 128 :+ 128]", "(t.n + 1) * 128 :+ 128]",
     "store-next-n-tile", "index", False,
     "the epilogue stores at the next N tile", None),
    ("gemm-sm90-ws/bf16-128x256-s2", 30, "A[t.m * 128", "A[t.n * 128",
     "a-from-n-axis", "index", False,
     "the A box takes its row from the N tile axis", None),
    ("gemm-sm90-ws/bf16-128x64-s4-p", 42, "mma.warpgroup * 64 :+ 64]", "mma.warpgroup * 32 :+ 64]",
     "a-window-warpgroup-stride", "index", True,
     "consumer warpgroups read A rows at a stride of 32 for 64-row windows: the second multiplies the wrong rows", None),
    ("gemm-sm90-ws/bf16-64x64-s4", 15, "n = N / 64]", "n = N / 128]",
     "tile-space-half-n", "coverage", False,
     "an N tile space of N/128 for 64-column tiles", None),
    ("gemm-sm90-ws/f16-64x128-s3", 8, "multiple_of 128", "multiple_of 64",
     "multiple-of-too-weak", "divisibility", False,
     "N multiple_of 64 with 128-column tiles: N = 832 leaves 64 columns unwritten",
     [{"M": 512, "N": 512, "K": 512}, {"M": 1024, "N": 832, "K": 384}]),
    # ---- gemm-sm80
    ("gemm-sm80/sm_90a-bf16-128x128-s3", 42, "all.warp / 2 * 64", "all.warp % 2 * 64",
     "ldmatrix-a-b-warp-mapping", "index", True,
     "the ldmatrix of A uses the B warp mapping (warp % 2)", None),
    ("gemm-sm80/sm_90a-f16-64x64-s4", 49, "t.n * 64 + all.warp % 2 * 32", "t.n * 64 + all.warp / 2 * 32",
     "store-n-warp-mapping", "index", False,
     "the output column window uses the row warp mapping (warp / 2)", None),
    ("gemm-sm80/sm_90a-bf16-128x128-s3", 29, "s * 32 :+ 32", "(s + 1) * 32 :+ 32",
     "prologue-k-off-by-one", "index", True,
     "the prologue loads A's K chunk one step ahead of B's", None),
    ("gemm-sm80/sm_90a-f16-64x64-s4", 8, "multiple_of 32", "multiple_of 16",
     "multiple-of-too-weak", "divisibility", True,
     "K multiple_of 16 with 32-wide K chunks: K = 400 drops its last 16 columns",
     [{"M": 512, "N": 512, "K": 512}, {"M": 1024, "N": 768, "K": 400}]),
    ("gemm-sm80/sm_80-bf16-128x128-s4", 34, "cp_async_wait(2)", "cp_async_wait(3)",
     "wait-one-group-short", "visibility", True,
     "cp_async_wait(3) with 3 groups in flight: the stage about to be read may not have landed", None),
    # ---- gemm-batched
    ("gemm-batched/bf16-128x128-s4", 30, "A[t.b, ", "A[0, ",
     "a-ignores-batch", "index", False,
     "the A coordinate ignores the batch", None),
    ("gemm-batched/bf16-128x128-s4", 21, "regs 40", "regs 232",
     "producer-budget-of-consumers", "register-budget", False,
     "the producer's setmaxnreg is the consumers' 232: an increase on the producer (3 warpgroups x 232 registers)", None),
    ("gemm-batched/bf16-64x128-s3-p", 31, "B[t.b, t.n *", "B[t.b, t.m *",
     "b-from-m-axis", "index", False,
     "the B box takes its rows from the M tile axis", None),
    ("gemm-batched/f16-64x256-s4", 16, "b = BATCH,", "b = BATCH / 2,",
     "tile-space-half-batch", "coverage", False,
     "a batch tile axis of BATCH/2", None),
    # ---- gemm-grouped
    ("gemm-grouped/bf16-64x128-s4", 31, "A[t.g * MG", "A[(t.g + 1) * MG",
     "a-offset-next-group", "index", False,
     "the A row window is offset by one group too many", None),
    ("gemm-grouped/bf16-128x128-s3-p", 48, "C[t.g * MG + ", "C[",
     "c-ignores-group", "index", False,
     "the output row window ignores the group offset", None),
    ("gemm-grouped/f16-64x64-s3-p", 17, "m = MG / 64,", "m = MG / 128,",
     "tile-space-half-m", "coverage", False,
     "a per-group row tile axis of MG/128 for 64-row tiles", None),
    # ---- gemm-sm90-splitn
    ("gemm-sm90-splitn/bf16-64x128-s2", 42, "mma.warpgroup * 64 :+ 64]", "0 :+ 64]",
     "b-half-not-split", "index", True,
     "both consumer warpgroups multiply the first half of the B stage", None),
    ("gemm-sm90-splitn/bf16-64x256-s3-p", 47, "mma.warpgroup * 128", "mma.warpgroup * 64",
     "store-halves-overlap", "coverage", False,
     "the two N halves are stored at a stride of half their width: overlapping columns", None),
    ("gemm-sm90-splitn/f16-64x128-s3-p", 9, "multiple_of 128", "multiple_of 64",
     "multiple-of-too-weak", "divisibility", False,
     "N multiple_of 64 with 128-column tiles: N = 832 leaves 64 columns unwritten",
     [{"M": 512, "N": 512, "K": 512}, {"M": 1024, "N": 832, "K": 384}]),
    # ---- attention-fwd
    ("attention-fwd/bf16-hd64-q64-s3-p", 73, "sync_role(mma)", "fence_proxy_async()",
     "stats-read-before-barrier", "visibility", True,
     "the barrier after the row statistics' shared store is a fence instead: they are read back by other threads with no barrier", None),
    ("attention-fwd/bf16-hd128-q128-s2", 80, "sync_role(mma)", "sync_role(load)",
     "p-fence-wrong-barrier", "visibility", True,
     "P is written generically and fenced, but the barrier names the load role: nothing orders the other warps' writes before the wgmma reads P", None),
    ("attention-fwd/f16-hd64-q128-s3", 47, "j * 64 :+ 64]", "t.q * 64 :+ 64]",
     "v-from-query-tile", "index", False,
     "the V box is taken at the query tile instead of the key tile j", None),
    ("attention-fwd/bf16-hd64-q128-s4", 45, "K[t.b, ", "K[0, ",
     "k-ignores-head", "index", False,
     "the K coordinate ignores the batch-head", None),
    ("attention-fwd/bf16-hd128-q128-s3-p", 11, "multiple_of 128", "multiple_of 64",
     "multiple-of-too-weak", "divisibility", False,
     "S multiple_of 64 with 128-query tiles: S = 320 leaves 64 queries unwritten",
     [{"BH": 4, "S": 256}, {"BH": 3, "S": 320}]),
    # ---- kmeans-assign
    ("kmeans-assign/d128-128x128-s2-p", 65, "+ kt * 128", "+ kt * 64",
     "argmin-offset-half-tile", "index", False,
     "the argmin's centroid offset uses half the centroid tile", None),
    ("kmeans-assign/d64-128x128-s5-p", 41, "CN[t.b, kt * 128 :+ 128]", "CN[t.b, t.n * 128 :+ 128]",
     "norms-from-point-tile", "index", True,
     "the centroid-norm vector is indexed by the point tile instead of the centroid tile", None),
    ("kmeans-assign/d256-128x128-s2-p", 71, "mma.warpgroup * 64", "mma.warpgroup * 32",
     "store-warpgroups-overlap", "coverage", False,
     "the two consumer warpgroups store at a stride of 32 for 64-point windows", None),
    ("kmeans-assign/d128-128x128-s4-p", 10, "multiple_of 128", "multiple_of 64",
     "multiple-of-too-weak", "divisibility", False,
     "K multiple_of 64 with 128-centroid tiles: K = 576 ignores its last 64 centroids",
     [{"B": 2, "N": 1024, "K": 512}, {"B": 2, "N": 1024, "K": 576}]),
    # ---- kmeans-update
    ("kmeans-update/128x256-s3-p", 52, "ICNT[t.b, t.k *", "ICNT[t.b, t.d *",
     "icnt-wrong-axis", "index", False,
     "the 1/count vector is indexed by the D tile axis instead of the K tile axis", None),
    ("kmeans-update/128x128-s2", 35, "OH[t.b, ", "OH[0, ",
     "oh-ignores-batch", "index", False,
     "the one-hot operand ignores the batch", None),
    ("kmeans-update/64x128-s3-p", 25, "regs 40", "regs 240",
     "producer-budget-of-consumer", "register-budget", False,
     "the producer's setmaxnreg is the consumer's 240: both roles increase", None),
    ("kmeans-update/64x128-s3-p", 20, "k = K / 128]", "k = K / 256]",
     "tile-space-half-k", "coverage", False,
     "a K tile axis of K/256 for 128-column tiles", None),
    # ---- knn-topk
    ("knn-topk/d128-128x128-s4-p", 53, "t.q * 128 + mma.warpgroup * 64 :+ 64]", "t.q * 128 :+ 64]",
     "qnorm-ignores-warpgroup", "index", False,
     "the query-norm vector ignores the warpgroup: the second warpgroup adds the first's norms", None),
    ("knn-topk/d128-64x128-s3", 42, "C[t.b, kt * 128", "C[t.b, t.q * 128",
     "c-from-query-tile", "index", False,
     "the centroid box is taken at the query tile instead of the database tile kt", None),
    ("knn-topk/d64-128x128-s6-p", 65, "Idx[t.b, t.q * 128 + mma.warpgroup * 64 :+ 64, kt]", "Idx[t.b, t.q * 128 + mma.warpgroup * 64 :+ 64, kt + 1]",
     "idx-next-tile", "index", False,
     "the candidate index is stored at the next database tile's column", None),
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


def sh(cake, *args):
    return subprocess.run([cake, *args], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cake", default=os.environ.get("CAKE_BIN", "target/release/cake"))
    a = ap.parse_args()
    seen = set()
    entries = []
    bad = 0
    for case, line, old, new, slug, cls, smem, what, shapes in BUGS:
        family = case.split("/")[0]
        stem = f"{family}--{slug}"
        assert stem not in seen, stem
        seen.add(stem)
        prog = sh(a.cake, "corpus", "show", case)
        if prog.returncode != 0:
            sys.exit(f"{case}: {prog.stderr}")
        lines = prog.stdout.split("\n")
        before = lines[line - 1]
        if before.count(old) != 1:
            sys.exit(f"{stem}: line {line} of {case} does not contain {old!r} once: {before!r}")
        after = before.replace(old, new)
        lines[line - 1] = after
        header = [
            "# dataflow-bench (held out: do not tune the verifier on this file): one-line bug",
            f"# base: {case}",
            f"# edit: line {line + HEADER_LINES} (line {line} of the base case)",
            f"#   before: {before.strip()}",
            f"#   after:  {after.strip()}",
            f"# class: {cls}: {what}",
        ]
        assert len(header) == HEADER_LINES
        with open(os.path.join(HERE, stem + ".cake"), "w") as f:
            f.write("\n".join(header + lines))
        man = tomllib.loads(sh(a.cake, "corpus", "show", "--manifest", case).stdout)
        wl = dict(man["workload"])
        if shapes is not None:
            wl["shapes"] = shapes
        with open(os.path.join(HERE, stem + ".workload.toml"), "w") as f:
            f.write(f"# Workload of {stem}.cake: the effective [workload] of {case}"
                    + (" with shapes allowed by the edited `multiple_of`" if shapes else "") + ".\n")
            for k, v in wl.items():
                f.write(f"{k} = {toml_value(v)}\n")
        chk = sh(a.cake, "check", "--message-format", "json", os.path.join(HERE, stem + ".cake"))
        codes = [json.loads(l)["code"] for l in chk.stdout.splitlines() if l.startswith("{")]
        ecodes = [c for c in codes if c.startswith("E")]
        if ecodes:
            bad += 1
            print(f"E-code in {stem}: {ecodes}\n{chk.stdout}", file=sys.stderr)
        entries.append((stem, family, case, line + HEADER_LINES, line, cls, smem, before.strip(), after.strip(), what))
        print(f"{stem:55} {cls:15} {','.join(codes) or '-'}")
    with open(os.path.join(HERE, "manifest.toml"), "w") as f:
        f.write("# The held-out data-consistency benchmark (see README.md). One [[bug]] per program:\n"
                "# `line` is the edited line of `file` (the verifier's primary span should be there),\n"
                "# `base_line` the same line in the base case; `smem` marks bugs that touch shared\n"
                "# memory (run under compute-sanitizer racecheck). Generated by make_bugs.py.\n")
        for stem, family, case, l, bl, cls, smem, before, after, what in entries:
            f.write(f"\n[[bug]]\nfile = \"{stem}.cake\"\nworkload = \"{stem}.workload.toml\"\n"
                    f"family = \"{family}\"\nbase = \"{case}\"\nline = {l}\nbase_line = {bl}\n"
                    f"class = \"{cls}\"\nsmem = {toml_value(smem)}\nbefore = {toml_value(before)}\n"
                    f"after = {toml_value(after)}\nwhat = {toml_value(what)}\n")
    print(f"{len(entries)} bugs over {len({e[1] for e in entries})} families; {bad} with E-codes")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
