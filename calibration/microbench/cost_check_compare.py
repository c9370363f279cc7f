#!/usr/bin/env python3
"""Predicted (`cake cost`) against measured (`cake bench`, calibration/microbench/cost_check.sh).

Usage: python3 calibration/microbench/cost_check_compare.py RECORDS.json [CAKE_BINARY] [--calibration FILE]
Prints one line per measurement and Spearman's rank correlation and MAPE over all of them.
"""
import json
import subprocess
import sys

args = sys.argv[1:]
extra = []
if "--calibration" in args:
    i = args.index("--calibration")
    extra = ["--calibration", args[i + 1]]
    args = args[:i] + args[i + 2:]
records = json.load(open(args[0]))
cake = args[1] if len(args) > 1 else "target/debug/cake"


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    for k, i in enumerate(order):
        r[i] = float(k)
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


rows = []
for r in records:
    if r["verdict"] != "pass" or not r["median_ms"]:
        continue
    shape = ",".join(f"{k}={v}" for k, v in r["shape"].items())
    out = subprocess.run([cake, "cost", f"examples/{r['program']}.cake", "--shape", shape, "--message-format", "json", *extra],
                         capture_output=True, text=True)
    e = json.loads(out.stdout)
    rows.append((r["program"], shape, r["median_ms"], e["predicted_ms"], e["bottleneck"]))
    print(f"{r['program']:<14} {shape:<28} measured {r['median_ms']:8.4f}  predicted {e['predicted_ms']:8.4f} ms"
          f"  ({100 * (e['predicted_ms'] / r['median_ms'] - 1):+6.1f}%)  {e['bottleneck']}")
for name, sel in (("all", rows), *((p, [x for x in rows if x[0] == p]) for p in sorted({x[0] for x in rows}))):
    m = [x[2] for x in sel]
    p = [x[3] for x in sel]
    mape = 100 * sum(abs(b - a) / a for a, b in zip(m, p)) / len(m)
    print(f"{name}: n={len(m)} spearman={spearman(m, p):.3f} mape={mape:.1f}%")
