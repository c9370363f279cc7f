#!/usr/bin/env bash
# One device call on the H200 machine (no cargo there): the held-out data-consistency benchmark
# (verify-benchmark/dataflow/, issue 13) run with the verifier bypassed, to record what each
# one-line bug really does on the GPU.
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#   device: run(command="bash scripts/device-dataflow-bench.sh", carry=["target/release/cake-device"])
#   after:  python3 scripts/dataflow-bench-score.py <files_at>/dataflow-runs.jsonl
#
# 1. For every bug of verify-benchmark/dataflow/manifest.toml, `cake run FILE --unsafe-skip-verify
#    --workload W --seed 1` and `--seed 2` (each over the workload's two fixed shapes), JOBS at a
#    time. One JSON object per program × seed goes to $OUT/dataflow-runs.jsonl: file, seed, rc,
#    verdict (the worst of its runs: timeout > error > mismatch > skipped > pass; `no-gpu` for
#    exit 3, `budget` when skipped for time), and per run the shape, dist, verdict, error class
#    and stage, read from that invocation's run records ($OUT/evidence/<stem>-s<seed>/runs/).
# 2. For the bugs marked `smem = true` whose runs all passed: one run under
#    `compute-sanitizer --tool racecheck` (seed 1, the workload's first shape); one JSON object
#    each to $OUT/dataflow-racecheck.jsonl: file, rc, hazards (the sanitizer's error count),
#    racecheck summary lines.
# The run records and logs come back packed as $OUT/dataflow-evidence.tar.gz.
#
# Environment: CAKE_BIN (default target/release/cake-device), OUT (default /tmp/dataflow-bench-out),
# JOBS (parallel `cake run`s, default 6), BUDGET_S (overall cap, default 420 s), RACE_S (the part of
# it kept for racecheck, default 110 s), PER_RUN_S (cap of one `cake run`, default 90 s),
# COMPUTE_SANITIZER (default: on PATH, else /usr/local/cuda/bin/compute-sanitizer).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
export CAKE=${CAKE_BIN:-$ROOT/target/release/cake-device}
export OUT=${OUT:-/tmp/dataflow-bench-out}
export BENCH=verify-benchmark/dataflow
JOBS=${JOBS:-6}
BUDGET_S=${BUDGET_S:-420}
RACE_S=${RACE_S:-110}
export PER_RUN_S=${PER_RUN_S:-90}
mkdir -p "$OUT/evidence" "$OUT/logs" "$OUT/lines" "$OUT/race"
export CAKE_NVRTC_LIB=${CAKE_NVRTC_LIB:-/usr/local/cuda/lib64/libnvrtc.so.13}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L || true
T0=$(date +%s)
export RUN_DEADLINE=$((T0 + BUDGET_S - RACE_S))
export RACE_DEADLINE=$((T0 + BUDGET_S))
[ -x "$CAKE" ] || { echo "no cake binary at $CAKE"; exit 1; }

# The JSON of one invocation, from its run records (python3; no tomllib needed).
export COLLECT=$OUT/collect.py
cat >"$COLLECT" <<'PY'
import glob, json, os, re, sys
mode = sys.argv[1]
if mode == "run":
    stem, seed, rc, ev, log, wall = sys.argv[2:8]
    rc = int(rc)
    runs = []
    for p in sorted(glob.glob(os.path.join(ev, "runs", "*.json"))):
        try:
            r = json.load(open(p))
        except Exception as e:
            runs.append({"record": os.path.basename(p), "verdict": "error", "error": f"unreadable record: {e}"})
            continue
        err = r.get("error") or {}
        runs.append({"shape": r.get("shape"), "dist": r.get("dist"), "verdict": r.get("verdict"),
                     "error": err.get("class"), "stage": r.get("stage"),
                     "max_rel_err": max([c.get("max_rel_err", 0) or 0 for c in r.get("checks") or [] if isinstance(c, dict)] or [0])})
    order = ["timeout", "error", "mismatch", "skipped", "pass"]
    vs = [x["verdict"] for x in runs if x.get("verdict") in order]
    if rc == 3:
        verdict = "no-gpu"
    elif rc in (124, 137):
        verdict = "timeout"
    elif vs:
        verdict = min(vs, key=order.index)
        if verdict == "pass" and rc != 0:
            verdict = "error"
    else:
        verdict = "error"
    tail = open(log, errors="replace").read()[-600:] if os.path.exists(log) else ""
    print(json.dumps({"file": stem + ".cake", "seed": int(seed), "rc": rc, "verdict": verdict,
                      "verdicts": vs, "runs": runs, "wall_s": int(wall),
                      "log_tail": tail if verdict not in ("pass",) else ""}))
elif mode == "skip":
    stem, seed, why = sys.argv[2:5]
    print(json.dumps({"file": stem + ".cake", "seed": int(seed), "rc": None, "verdict": why, "verdicts": [], "runs": []}))
elif mode == "passed":
    # exit 0 when every given line file says the program passed
    ok = all(json.load(open(p)).get("verdict") == "pass" for p in sys.argv[2:])
    sys.exit(0 if ok else 1)
elif mode == "summary":
    from collections import Counter
    lines = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    c = Counter(x.get("verdict") for x in lines)
    print(f"{len(lines)} program x seed invocations: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    progs = {}
    for x in lines:
        progs.setdefault(x["file"], []).append(x.get("verdict"))
    bad = [f for f, v in progs.items() if any(y in ("mismatch", "error", "timeout") for y in v)]
    print(f"{len(progs)} programs, {len(bad)} fail on the GPU (before racecheck)")
    if len(sys.argv) > 3 and os.path.exists(sys.argv[3]):
        rs = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
        hz = [r["file"] for r in rs if r.get("hazards")]
        print(f"racecheck: {sum(1 for r in rs if 'hazards' in r)} runs, {len(hz)} with hazards: {' '.join(hz)}")
elif mode == "first-shape":
    # `shapes = [{ R = 64 }, { R = 448 }]` -> R=64
    for line in open(sys.argv[2]):
        if line.startswith("shapes"):
            m = re.search(r"\{([^}]*)\}", line)
            print(",".join(kv.replace(" ", "") for kv in m.group(1).split(",")))
            break
elif mode == "race":
    stem, rc, log = sys.argv[2:5]
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    errs = [int(x) for x in re.findall(r"ERROR SUMMARY: (\d+) error", text)]
    summ = re.findall(r"RACECHECK SUMMARY: .*", text)
    hz = sum(errs) if errs else sum(int(x) for x in re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text))
    print(json.dumps({"file": stem + ".cake", "rc": int(rc), "hazards": hz, "sanitizer_ran": bool(errs or summ),
                      "summary": summ[:8], "hazard_lines": re.findall(r"=+ (?:Error|Warning): Race.*", text)[:8]}))
PY

run_one() {
  local stem=$1 seed=$2 name="$1-s$2"
  if [ "$(date +%s)" -ge "$RUN_DEADLINE" ]; then
    python3 "$COLLECT" skip "$stem" "$seed" budget >"$OUT/lines/$name.json"
    return 0
  fi
  local t=$(date +%s) rc
  timeout --kill-after=5 "$PER_RUN_S" "$CAKE" run "$BENCH/$stem.cake" --unsafe-skip-verify \
    --workload "$BENCH/$stem.workload.toml" --seed "$seed" --timeout 20 --max-timeouts 1 \
    --repeats 1 --warmup 0 --evidence "$OUT/evidence/$name" >"$OUT/logs/$name.log" 2>&1
  rc=$?
  python3 "$COLLECT" run "$stem" "$seed" "$rc" "$OUT/evidence/$name" "$OUT/logs/$name.log" $(( $(date +%s) - t )) \
    >"$OUT/lines/$name.json" || echo "{\"file\": \"$stem.cake\", \"seed\": $seed, \"rc\": $rc, \"verdict\": \"error\", \"verdicts\": [], \"runs\": []}" >"$OUT/lines/$name.json"
  echo "$name rc=$rc $(grep -o '"verdict": "[a-z-]*"' "$OUT/lines/$name.json" | head -1)"
}
export -f run_one

# The bugs, in manifest order, and the shared-memory ones.
STEMS=$(sed -n 's/^file = "\(.*\)\.cake"$/\1/p' "$BENCH/manifest.toml")
SMEM=$(awk '/^file = /{f=$3; gsub(/"|\.cake/, "", f)} /^smem = true/{print f}' "$BENCH/manifest.toml")
echo "==> $(echo "$STEMS" | wc -w) bugs × 2 seeds, $JOBS at a time (run phase until +$((BUDGET_S - RACE_S)) s)"
for s in $STEMS; do printf '%s 1\n%s 2\n' "$s" "$s"; done | xargs -P "$JOBS" -n 2 bash -c 'run_one "$@"' _
: >"$OUT/dataflow-runs.jsonl"
for s in $STEMS; do cat "$OUT/lines/$s-s1.json" "$OUT/lines/$s-s2.json" >>"$OUT/dataflow-runs.jsonl" 2>/dev/null; done
echo "<== runs: $(( $(date +%s) - T0 )) s"
python3 "$COLLECT" summary "$OUT/dataflow-runs.jsonl"

echo "==> racecheck over the shared-memory bugs that passed"
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
[ -n "$CS" ] || CS=/usr/local/cuda/bin/compute-sanitizer
: >"$OUT/dataflow-racecheck.jsonl"
if [ ! -x "$CS" ]; then
  echo "no compute-sanitizer (tried $CS): racecheck skipped"
  echo "{\"skipped\": \"no compute-sanitizer at $CS\"}" >>"$OUT/dataflow-racecheck.jsonl"
else
  "$CS" --version | tail -n 1
  for s in $SMEM; do
    # only bugs whose every run (both seeds) passed: a wrong answer is already a failure
    python3 "$COLLECT" passed "$OUT/lines/$s-s1.json" "$OUT/lines/$s-s2.json" 2>/dev/null || continue
    if [ "$(date +%s)" -ge "$RACE_DEADLINE" ]; then
      echo "{\"file\": \"$s.cake\", \"skipped\": \"budget\"}" >>"$OUT/dataflow-racecheck.jsonl"; continue
    fi
    shape=$(python3 "$COLLECT" first-shape "$BENCH/$s.workload.toml")
    left=$((RACE_DEADLINE - $(date +%s))); [ "$left" -gt 150 ] && left=150
    timeout --kill-after=5 "$left" "$CS" --tool racecheck --target-processes all --print-limit 20 \
      "$CAKE" run "$BENCH/$s.cake" --unsafe-skip-verify --workload "$BENCH/$s.workload.toml" --seed 1 \
      --shape "$shape" --timeout $((left > 20 ? left - 10 : 10)) --max-timeouts 1 --repeats 1 --warmup 0 \
      --evidence "$OUT/race/evidence-$s" >"$OUT/race/$s.log" 2>&1
    rc=$?
    python3 "$COLLECT" race "$s" "$rc" "$OUT/race/$s.log" | tee -a "$OUT/dataflow-racecheck.jsonl"
  done
fi
echo "<== total: $(( $(date +%s) - T0 )) s"

# At most 8 files come back: the two JSONL files, this summary and one archive of everything else.
python3 "$COLLECT" summary "$OUT/dataflow-runs.jsonl" "$OUT/dataflow-racecheck.jsonl" >"$OUT/dataflow-summary.txt"
tar -C "$OUT" -czf "$OUT/dataflow-evidence.tar.gz" evidence logs lines race 2>/dev/null || echo "could not pack the evidence"
rm -rf "$OUT/evidence" "$OUT/logs" "$OUT/lines" "$OUT/race" "$OUT/collect.py"
cat "$OUT/dataflow-summary.txt"
ls -la "$OUT"
exit 0
