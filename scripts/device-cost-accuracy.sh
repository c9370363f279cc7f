#!/usr/bin/env bash
# One device call on the H200 machine (no cargo there): the cost model's accuracy data (issue 17).
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#   device: run(command="bash scripts/device-cost-accuracy.sh", carry=["target/release/cake-device"])
#           (kind nvidia-h200-x4 or -x8: one shard per GPU, in parallel, merged at the end)
#   after:  python3 scripts/corpus-cost-accuracy.py <files_at>/cost-accuracy-h200.json --svg target/cost-accuracy.svg
#
# Every gpu-tier corpus case of sm_90a is timed with `cake bench` (each output checked by the case's
# oracle, no peer) at its gpu-tier shape (the workload's last `shapes` entry) and its headline shape
# (the workload's `headline`), then the `[[unfitted]]` probes of calibration/microbench/sm_90a/
# suite.toml, whose terms the model lacks (the fitted `[[bench]]` programs are left to
# `cake-evolve-compiler calibrate`, which times them itself). scripts/cost-accuracy-bench.py does the
# runs; the result is $OUT/cost-accuracy-h200.json (schema cake-cost-accuracy/1: per run the case id,
# family, shape kind, shape, oracle verdict, median/min/p90 µs). The file is rewritten after every run.
#
# Resumable: RESUME=FILE[:FILE...] (a previous call's JSON, carried back into the checkout) skips
# every run those files hold, and the output keeps them: copy the last call's file to
# target/cost-accuracy-prev.json here, then run(command="RESUME=target/cost-accuracy-prev.json bash
# scripts/device-cost-accuracy.sh", carry=["target/release/cake-device", "target/cost-accuracy-prev.json"]). With several GPUs and no SHARD, one worker
# per GPU runs shard g/n on GPU g and the shards are merged into $OUT/cost-accuracy-h200.json.
# Without a GPU it prints a SKIP line and exits 3, writing nothing.
#
# Environment: CAKE_BIN (default target/release/cake-device), OUT (default /tmp/cost-accuracy-out),
# TIME_CAP_S (no run starts after this many seconds; default 420), SHARD (i/n: this call runs one
# shard only), GPUS (how many GPUs to spread over; default all), PER_RUN_S (cap of one run, default
# 120), REPEATS, CASES (comma-separated case-id prefixes), PROBES (0: no probes), TARGET (sm_90a).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
export CAKE_BIN=${CAKE_BIN:-$ROOT/target/release/cake-device}
OUT=${OUT:-/tmp/cost-accuracy-out}
TIME_CAP_S=${TIME_CAP_S:-420}
BENCH=$ROOT/scripts/cost-accuracy-bench.py
T0=$(date +%s)
export DEADLINE_UNIX=$((T0 + TIME_CAP_S))

# shellcheck source=scripts/common.sh
. "$ROOT/scripts/common.sh"
cake_device_preamble "the cost-accuracy runs need the H200 (nothing measured, no JSON written)"
command -v python3 >/dev/null || { echo "error: python3 is needed on the device"; exit 1; }
nvidia-smi -L 2>/dev/null || true

resume=()
IFS=':' read -r -a prev <<<"${RESUME:-}"
for f in "${prev[@]}"; do [ -n "$f" ] && resume+=(--resume "$f"); done
ngpu=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)}
[ "${ngpu:-0}" -ge 1 ] 2>/dev/null || ngpu=1
RESULT=$OUT/cost-accuracy-h200.json
# The run records themselves (with the model's prediction at run time) and their programs, for
# `cake-evolve-compiler import --kind run` here: real evidence for cost_model.misprediction buckets.
export RECORDS_DIR=${RECORDS_DIR:-$OUT/records}

if [ -n "${SHARD:-}" ] || [ "$ngpu" -eq 1 ]; then
  python3 "$BENCH" run -o "$RESULT" "${resume[@]}" 2>&1 | tee "$OUT/cost-accuracy.log"
  status=${PIPESTATUS[0]}
else
  echo "==> $ngpu shards, one per GPU"
  pids=()
  for g in $(seq 0 $((ngpu - 1))); do
    CUDA_VISIBLE_DEVICES=$g SHARD=$((g + 1))/$ngpu python3 "$BENCH" run -o "$OUT/shard-$((g + 1)).json" "${resume[@]}" \
      >"$OUT/cost-accuracy-shard-$((g + 1)).log" 2>&1 &
    pids+=($!)
  done
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=$?; done
  tail -n 3 "$OUT"/cost-accuracy-shard-*.log
  shards=("$OUT"/shard-*.json)
  [ -e "${shards[0]}" ] && python3 "$BENCH" merge "${shards[@]}" -o "$RESULT" || status=1
fi
[ -f "$RESULT" ] && python3 - "$RESULT" <<'PY'
import collections, json, sys
d = json.load(open(sys.argv[1]))
c = collections.Counter((r["shape_kind"], r.get("verdict")) for r in d["runs"])
print("runs:", ", ".join(f"{k[0]} {k[1]}: {v}" for k, v in sorted(c.items())), f"| not run: {len(d.get('not_run', []))}")
PY
echo "<== cost accuracy: $(( $(date +%s) - T0 )) s, exit $status"
exit "$status"
