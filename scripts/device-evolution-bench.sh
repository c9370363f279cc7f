#!/usr/bin/env bash
# One device call on the H200 machine (no cargo there): the evidence of the seeded failure
# benchmark of compiler evolution (evolution/benchmark/, issue 12). Every program of every class
# — training, held-out, probe and the training programs' boundary variants — is run once with the
# verifier bypassed (the class's rules are what the engine must learn back), and each run record
# is imported into the class's evidence store for its set.
#
#   here:   cargo build --release -p cake -p cake-evolve && \
#           strip -o target/release/cake-device target/release/cake && \
#           strip -o target/release/cake-evolve-compiler-device target/release/cake-evolve-compiler
#   device: run(command="bash scripts/device-evolution-bench.sh",
#               carry=["target/release/cake-device", "target/release/cake-evolve-compiler-device"])
#   after:  tar xzf <files_at>/evolution-bench-evidence.tar.gz -C evolution/benchmark
#           (adds <class>/evidence/<set>/ stores; append-only, content-addressed)
#
# Per program: `cake run FILE --unsafe-skip-verify --workload W --seed 1 --dist normal --repeats 1
# --warmup 0 --timeout 20 --max-timeouts 1`, JOBS at a time, then
# `cake-evolve-compiler import --kind run RECORD --program FILE --store <class>/evidence/<set>`.
# A build failure (ptxas, NVRTC) is a run record too (`build_*`). One JSON line per program goes to
# $OUT/evolution-bench-runs.jsonl: class, set, file, rc, verdict (worst of its runs: timeout >
# error > mismatch > skipped > pass; `no-gpu` for exit 3, `budget` when skipped for time), error
# classes.
#
# Environment: CAKE_BIN, EVOLVE_BIN (default target/release/*-device), OUT (default
# /tmp/evolution-bench-out), JOBS (default 8), BUDGET_S (default 480), PER_RUN_S (default 60),
# SETS (default "train heldout probe variants").
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
export CAKE=${CAKE_BIN:-$ROOT/target/release/cake-device}
export EVOLVE=${EVOLVE_BIN:-$ROOT/target/release/cake-evolve-compiler-device}
export OUT=${OUT:-/tmp/evolution-bench-out}
export BENCH=evolution/benchmark
JOBS=${JOBS:-8}
BUDGET_S=${BUDGET_S:-480}
export PER_RUN_S=${PER_RUN_S:-60}
SETS=${SETS:-"train heldout probe variants"}
mkdir -p "$OUT/runs" "$OUT/logs" "$OUT/lines" "$OUT/stores"
export CAKE_NVRTC_LIB=${CAKE_NVRTC_LIB:-/usr/local/cuda/lib64/libnvrtc.so.13}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L || true
T0=$(date +%s)
export DEADLINE=$((T0 + BUDGET_S))
[ -x "$CAKE" ] || { echo "no cake binary at $CAKE"; exit 1; }
[ -x "$EVOLVE" ] || { echo "no cake-evolve-compiler binary at $EVOLVE"; exit 1; }

export COLLECT=$OUT/collect.py
cat >"$COLLECT" <<'PY'
import glob, json, os, sys
cls, set_, f, rc, ev = sys.argv[1:6]
rc = int(rc)
runs = []
for p in sorted(glob.glob(os.path.join(ev, "runs", "*.json"))):
    try:
        r = json.load(open(p))
    except Exception as e:
        runs.append({"verdict": "error", "error": f"unreadable record: {e}"})
        continue
    runs.append({"verdict": r.get("verdict"), "error": (r.get("error") or {}).get("class"), "stage": r.get("stage")})
order = ["timeout", "error", "mismatch", "skipped", "pass"]
vs = [x["verdict"] for x in runs if x.get("verdict") in order]
if rc == 3:
    verdict = "no-gpu"
elif rc in (124, 137):
    verdict = "timeout"
elif vs:
    verdict = min(vs, key=order.index)
else:
    verdict = "error"
print(json.dumps({"class": cls, "set": set_, "file": f, "rc": rc, "verdict": verdict,
                  "errors": sorted({x["error"] for x in runs if x.get("error")})}))
PY

run_one() {
  local f=$1
  local rel=${f#"$BENCH"/}
  local cls=${rel%%/*} rest=${rel#*/}
  local set_=${rest%%/*} stem
  stem=$(basename "$f" .cake)
  local name="$cls--$set_--$stem"
  if [ "$(date +%s)" -ge "$DEADLINE" ]; then
    echo "{\"class\": \"$cls\", \"set\": \"$set_\", \"file\": \"$rel\", \"rc\": null, \"verdict\": \"budget\", \"errors\": []}" >"$OUT/lines/$name.json"
    return 0
  fi
  local w="${f%.cake}.workload.toml" rc
  timeout --kill-after=5 "$PER_RUN_S" "$CAKE" run "$f" --unsafe-skip-verify --workload "$w" --seed 1 \
    --dist normal --timeout 20 --max-timeouts 1 --repeats 1 --warmup 0 --evidence "$OUT/runs/$name" \
    >"$OUT/logs/$name.log" 2>&1
  rc=$?
  python3 "$COLLECT" "$cls" "$set_" "$rel" "$rc" "$OUT/runs/$name" >"$OUT/lines/$name.json" \
    || echo "{\"class\": \"$cls\", \"set\": \"$set_\", \"file\": \"$rel\", \"rc\": $rc, \"verdict\": \"error\", \"errors\": []}" >"$OUT/lines/$name.json"
  echo "$name rc=$rc $(grep -o '"verdict": "[a-z-]*"' "$OUT/lines/$name.json" | head -1)"
}
export -f run_one

FILES=()
for d in "$BENCH"/*/; do
  for s in $SETS; do
    for f in "$d$s"/*.cake; do [ -f "$f" ] && FILES+=("$f"); done
  done
done
echo "==> ${#FILES[@]} programs, $JOBS at a time (until +$BUDGET_S s)"
printf '%s\n' "${FILES[@]}" | xargs -P "$JOBS" -n 1 bash -c 'run_one "$@"' _
echo "<== runs: $(( $(date +%s) - T0 )) s"

echo "==> import into the class stores"
imported=0
for f in "${FILES[@]}"; do
  rel=${f#"$BENCH"/}; cls=${rel%%/*}; rest=${rel#*/}; set_=${rest%%/*}; stem=$(basename "$f" .cake)
  for r in "$OUT/runs/$cls--$set_--$stem"/runs/*.json; do
    [ -f "$r" ] || continue
    "$EVOLVE" import --kind run "$r" --program "$f" --store "$OUT/stores/$cls/evidence/$set_" >/dev/null 2>>"$OUT/import.log" \
      && imported=$((imported + 1))
  done
done
echo "<== imported $imported run record(s); import errors: $(grep -c "^error" "$OUT/import.log" 2>/dev/null || echo 0)"

: >"$OUT/evolution-bench-runs.jsonl"
for f in "$OUT"/lines/*.json; do cat "$f" >>"$OUT/evolution-bench-runs.jsonl"; done
python3 - "$OUT/evolution-bench-runs.jsonl" >"$OUT/evolution-bench-summary.txt" <<'PY'
import json, sys
from collections import Counter, defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(Counter)
for r in rows:
    by[(r["class"], r["set"])][r["verdict"]] += 1
print(f"{len(rows)} programs")
for (c, s), n in sorted(by.items()):
    print(f"{c:<22} {s:<9} " + ", ".join(f"{k} {v}" for k, v in sorted(n.items())))
PY
tar -C "$OUT/stores" -czf "$OUT/evolution-bench-evidence.tar.gz" . 2>/dev/null || echo "could not pack the stores"
tar -C "$OUT" -czf "$OUT/evolution-bench-logs.tar.gz" logs 2>/dev/null || true
rm -rf "$OUT/runs" "$OUT/logs" "$OUT/lines" "$OUT/stores" "$COLLECT"
cat "$OUT/evolution-bench-summary.txt"
echo "<== total: $(( $(date +%s) - T0 )) s"
ls -la "$OUT"
exit 0
