#!/usr/bin/env bash
# First predicted-vs-measured check of the cost model: `cake bench` the two Hopper examples over a
# spread of shapes on the H200 (one device call), then compare here with `cake cost` predictions
# (calibration/microbench/cost_check_compare.py).
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-cost-check target/release/cake
#   device: run(command="bash calibration/microbench/cost_check.sh", carry=["target/release/cake-cost-check"])
#
# Writes $OUT/cost_check.json (one entry per run record: program, shape, verdict, median ms,
# baseline median ms) and $OUT/cost_check.log.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-/tmp/cost-check-out}
mkdir -p "$OUT"
CAKE=${CAKE_BIN:-$ROOT/target/release/cake-cost-check}
EV=${TMPDIR:-/tmp}/cost-check-evidence
rm -rf "$EV"
export CAKE_GIT_COMMIT=${CAKE_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  gemm=()
  for s in M=8192,N=8192,K=128 M=8192,N=8192,K=256 M=8192,N=8192,K=512 M=8192,N=8192,K=1024 \
           M=8192,N=8192,K=2048 M=8192,N=8192,K=4096 M=8192,N=8192,K=8192 M=4096,N=4096,K=4096 \
           M=4096,N=2048,K=8192 M=2048,N=2048,K=2048; do gemm+=(--shape "$s"); done
  timeout 300 "$CAKE" bench examples/gemm_bf16_ws.cake "${gemm[@]}" --repeats 10 --timeout 60 --max-timeouts 2 \
    --evidence "$EV" --color never
  km=()
  for s in B=32,N=65536,K=1024,D=128 B=32,N=65536,K=256,D=128 B=32,N=65536,K=512,D=128 \
           B=32,N=65536,K=2048,D=128 B=8,N=65536,K=1024,D=128 B=32,N=16384,K=1024,D=128; do km+=(--shape "$s"); done
  timeout 200 "$CAKE" bench examples/kmeans_assign.cake "${km[@]}" --repeats 10 --timeout 60 --max-timeouts 2 \
    --evidence "$EV" --color never
  nvidia-smi --query-gpu=clocks.sm --format=csv,noheader
} >"$OUT/cost_check.log" 2>&1
python3 - "$EV" "$OUT/cost_check.json" <<'PY'
import glob, json, sys
rows = []
for p in glob.glob(sys.argv[1] + "/runs/*.json"):
    r = json.load(open(p))
    t = r.get("times_ms") or {}
    b = r.get("baseline") or {}
    rows.append({"program": r["program"]["name"], "shape": r.get("shape"), "verdict": r.get("verdict"),
                 "error": r.get("error"), "median_ms": t.get("median_ms"), "min_ms": t.get("min_ms"),
                 "p90_ms": t.get("p90_ms"), "baseline_ms": (b.get("times_ms") or {}).get("median_ms"),
                 "tflops": r.get("tflops"), "created": r.get("created_unix_ms"),
                 "registers": (r.get("ptxas") or {}).get("registers"), "git_commit": (r.get("cake") or {}).get("git_commit")})
rows.sort(key=lambda x: x["created"] or 0)
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for x in rows:
    print(x["program"], x["shape"], x["verdict"], x["median_ms"], x["baseline_ms"], (x["error"] or {}).get("class", ""))
PY
tail -5 "$OUT/cost_check.log"
