#!/usr/bin/env bash
# Runs the GPU runtime end to end on the H200 machine, in ONE device call, with a release binary
# built elsewhere (the device machine has no cargo and no network):
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#           (stripped: ~7 MB instead of ~52 MB; the working tree and carried files share 64 MiB)
#   device: run(command="CAKE_GIT_COMMIT=<hash of HEAD> bash scripts/device-check.sh",
#               carry=["target/release/cake-device"], timeout_s=600)
#
# Steps, each printed as `==> NAME` ... `<== NAME: ok|FAILED` with the failing runs' errors:
#   1. environment: the binary, nvidia-smi, NVRTC and cuBLAS libraries, `cake __probe-gpu`
#   2. `cake run` over the three examples × their workload's 5 shapes × 3 distributions
#   3. `cake bench` gemm_bf16_ws at 8192³ against cuBLAS (and gemm_bf16_sm80), kmeans_assign at
#      its headline shape (B=32 N=65536 K=1024 D=128)
#   4. the deliberately broken examples/broken/tx_mismatch.cake with --unsafe-skip-verify at two
#      shapes: each must be recorded as `timeout` while the harness carries on
#   5. a summary of every run record
#
# Writes to $OUT (at most 8 files): device-check.log (everything), summary.txt (one line per run
# record), summary.json (the same as JSON), evidence.tar.gz (the run records:
# cake-device-evidence/runs/<sha256>.json).
# Whole script: well under 8 minutes (every step has a wall-clock cap).
#
# Environment: CAKE_BIN (default target/release/cake-device, else target/release/cake),
# CAKE_GIT_COMMIT, OUT (default /tmp/device-check-out), DEADLINE (seconds, default 470), QUICK=1 (one shape and one
# distribution per example, 5 bench repeats: a smoke test), CAKE_CUDA_DIR (default /usr/local/cuda).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-${TMPDIR:-/tmp}/device-check-out}
mkdir -p "$OUT"
LOG=$OUT/device-check.log

CAKE=${CAKE_BIN:-}
if [ -z "$CAKE" ]; then
  CAKE=$ROOT/target/release/cake-device
  [ -x "$CAKE" ] || CAKE=$ROOT/target/release/cake
fi
CUDA_DIR=${CAKE_CUDA_DIR:-/usr/local/cuda}
EVIDENCE=${TMPDIR:-/tmp}/cake-device-evidence
rm -rf "$EVIDENCE"
mkdir -p "$EVIDENCE"
QUICK=${QUICK:-0}
T0=$SECONDS
# Every step ends by this many seconds after the start (the device call allows 600).
DEADLINE=${DEADLINE:-470}

STEPS=()
FAILED=0
left() { echo $((DEADLINE - (SECONDS - T0))); }

step() {
  local name=$1 start=$SECONDS rc
  shift
  printf '\n==> %s  [%ss elapsed, %ss left]\n' "$name" "$((SECONDS - T0))" "$(left)"
  if [ "$(left)" -lt 15 ]; then
    echo "SKIPPED: out of time"
    STEPS+=("SKIPPED $name (out of time)")
    FAILED=$((FAILED + 1))
    return 0
  fi
  "$@"
  rc=$?
  if [ "$rc" = 0 ]; then
    printf '<== %s: ok (%ss)\n' "$name" "$((SECONDS - start))"
    STEPS+=("ok      $name ($((SECONDS - start))s)")
  else
    printf '<== %s: FAILED, exit %s (%ss)\n' "$name" "$rc" "$((SECONDS - start))"
    STEPS+=("FAILED  $name (exit $rc, $((SECONDS - start))s)")
    FAILED=$((FAILED + 1))
  fi
  return 0
}

# ---- environment -----------------------------------------------------------------------------
find_lib() { # NAME-GLOB: first match in the CUDA toolkit, then in Python's nvidia wheels
  local f
  for d in "$CUDA_DIR/lib64" "$CUDA_DIR/lib" "$CUDA_DIR/targets/x86_64-linux/lib"; do
    f=$(ls "$d"/$1 2>/dev/null | sort | head -n 1)
    [ -n "$f" ] && { echo "$f"; return 0; }
  done
  f=$(python3 - "$1" 2>/dev/null <<'EOF'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for hit in sorted(glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1]), recursive=True)):
        print(hit); raise SystemExit
EOF
)
  [ -n "$f" ] && { echo "$f"; return 0; }
  return 1
}

setup_env() {
  local ok=0
  if [ ! -x "$CAKE" ]; then
    echo "error: no cake binary at $CAKE (build it with 'cargo build --release -p cake' and carry target/release/cake)"
    return 1
  fi
  "$CAKE" --version || ok=1
  nvidia-smi -L || echo "warning: nvidia-smi failed"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
  NVRTC=$(find_lib 'libnvrtc.so.1[0-9]') || NVRTC=$(find_lib 'libnvrtc.so*') || NVRTC=
  if [ -z "$NVRTC" ]; then
    echo "error: libnvrtc not found under $CUDA_DIR/lib64 or in Python's nvidia wheels"
    ok=1
  else
    export CAKE_NVRTC_LIB=$NVRTC
    export LD_LIBRARY_PATH="$(dirname "$NVRTC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "NVRTC: $NVRTC"
  fi
  CUBLAS=$(find_lib 'libcublas.so.1[0-9]') || CUBLAS=
  if [ -z "$CUBLAS" ]; then
    echo "warning: libcublas not found: the cuBLAS check and baseline will be skipped (noted in records)"
  else
    case ":$LD_LIBRARY_PATH:" in *":$(dirname "$CUBLAS"):"*) ;; *) export LD_LIBRARY_PATH="$(dirname "$CUBLAS"):$LD_LIBRARY_PATH" ;; esac
    echo "cuBLAS: $CUBLAS"
  fi
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "CAKE_GIT_COMMIT=${CAKE_GIT_COMMIT:-unknown}"
  echo "probe:"
  timeout 60 "$CAKE" __probe-gpu || ok=1
  return $ok
}

# ---- runs --------------------------------------------------------------------------------------
# cake_step LIMIT ARGS...: one cake invocation under a wall-clock cap; prints its table and, for
# every failing run, the record's error.
cake_step() {
  local limit=$1 rc
  shift
  [ "$limit" -gt "$(( $(left) - 5 ))" ] && limit=$(( $(left) - 5 ))
  timeout --kill-after=5 "$limit" "$CAKE" "$@" --evidence "$EVIDENCE"
  rc=$?
  [ "$rc" = 124 ] && echo "error: the step exceeded its ${limit}s cap and was stopped"
  return "$rc"
}

shapes_args() { # EXAMPLE: --shape for the first workload shape in QUICK mode
  [ "$QUICK" = 1 ] || return 0
  case "$1" in
    gemm_bf16_ws) echo "--shape M=384,N=768,K=192 --dist normal" ;;
    gemm_bf16_sm80) echo "--shape M=384,N=640,K=192 --dist normal" ;;
    kmeans_assign) echo "--shape B=3,N=1024,K=256,D=128 --dist ties" ;;
  esac
}

run_example() {
  # shellcheck disable=SC2046
  cake_step 130 run "examples/$1.cake" --timeout 30 --max-timeouts 2 $(shapes_args "$1")
}

bench_reps() { [ "$QUICK" = 1 ] && echo 5 || echo 20; }

expect_timeouts() {
  cake_step 60 run examples/broken/tx_mismatch.cake --unsafe-skip-verify --timeout 20 \
    --shape M=128,N=256,K=64 --shape M=1024,N=1024,K=512 --dist normal --repeats 1
  local rc=$?
  # Exit 1 is expected (timeouts are failures); success means every record says timeout.
  python3 - "$EVIDENCE" <<'EOF'
import glob, json, sys
recs = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/runs/*.json")]
mine = [r for r in recs if r["program"]["name"] == "tx_mismatch"]
for r in mine:
    e = r.get("error") or {}
    print(f"  tx_mismatch {r['shape']}: verdict={r['verdict']} class={e.get('class')} stage={r['stage']}")
    print(f"    {(e.get('message') or '')[:300]}")
ok = len(mine) == 2 and all(r["verdict"] == "timeout" and r["program"]["unverified"] for r in mine)
print("  expectation (2 unverified records, both timeout):", "MET" if ok else "NOT MET")
sys.exit(0 if ok else 1)
EOF
  local prc=$?
  [ "$rc" = 124 ] && return 124
  return $prc
}

summarize() {
  python3 - "$EVIDENCE" "$OUT" <<'EOF'
import glob, json, os, sys
ev, out = sys.argv[1], sys.argv[2]
recs = sorted((json.load(open(f)) for f in glob.glob(ev + "/runs/*.json")), key=lambda r: r["created_unix_ms"])
rows, lines = [], []
def fmt(v, p=3):
    return "-" if v is None else f"{v:.{p}f}"
for r in recs:
    e = r.get("error") or {}
    t = r.get("times_ms") or {}
    b = r.get("baseline") or {}
    bad = next((c for c in r.get("checks", []) if not c["passed"]), None)
    detail = ((e.get("message") or "").splitlines() or [""])[0][:110] if e else ""
    if bad and not detail:
        fb = (bad.get("first_bad") or [{}])[0]
        detail = f"{bad['oracle']}: {bad['mismatches']}/{bad['checked']} wrong, {bad['nonfinite']} non-finite, first {fb.get('index')} got {fb.get('got')} want {fb.get('want')}"
    errs = [c["rel_l2_err"] for c in r.get("checks", []) if c.get("rel_l2_err") is not None]
    row = {
        "command": r["command"], "program": r["program"]["name"], "unverified": r["program"]["unverified"],
        "shape": ",".join(f"{k}={v}" for k, v in r["shape"].items()), "dist": r["dist"], "verdict": r["verdict"],
        "class": e.get("class"), "stage": r.get("stage"), "median_ms": t.get("median_ms"), "min_ms": t.get("min_ms"),
        "p90_ms": t.get("p90_ms"), "tflops": r.get("tflops"), "baseline_ms": (b.get("times_ms") or {}).get("median_ms"),
        "baseline_tflops": b.get("tflops"), "speed_ratio": b.get("speed_ratio"), "rel_l2_err": max(errs) if errs else None,
        "registers": (r.get("ptxas") or {}).get("registers"), "spills": ((r.get("ptxas") or {}).get("spill_store_bytes") or 0) + ((r.get("ptxas") or {}).get("spill_load_bytes") or 0),
        "detail": detail, "record": None,
    }
    rows.append(row)
    lines.append(f"{row['command']:<5} {row['program']:<15} {row['shape']:<28} {row['dist']:<9} {row['verdict']:<8} "
                 f"{fmt(row['median_ms'],4):>9} {fmt(row['tflops'],1):>7} {fmt(row['baseline_ms'],4):>9} {fmt(row['speed_ratio'],3):>6} "
                 f"{('%.1e' % row['rel_l2_err']) if row['rel_l2_err'] is not None else '-':>8}  {row['class'] or ''} {detail}")
counts = {}
for r in rows:
    counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
head = f"{'cmd':<5} {'program':<15} {'shape':<28} {'dist':<9} {'verdict':<8} {'med ms':>9} {'TFLOP/s':>7} {'base ms':>9} {'ratio':>6} {'rel err':>8}  class detail"
gpu = next((r["gpu"] for r in recs if r.get("gpu")), None)
cake = recs[0]["cake"] if recs else {}
text = "\n".join([f"gpu: {gpu}", f"cake: {cake}", f"records: {len(rows)} {counts}", head] + lines) + "\n"
open(os.path.join(out, "summary.txt"), "w").write(text)
json.dump({"gpu": gpu, "cake": cake, "counts": counts, "runs": rows}, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"wrote summary.txt and summary.json: {len(rows)} records {counts}")
EOF
}

main() {
  step "environment" setup_env
  if [ "${CAKE_NVRTC_LIB:-}" = "" ]; then
    echo "cannot continue without NVRTC"
  else
    step "run gemm_bf16_ws (5 shapes x 3 dists)" run_example gemm_bf16_ws
    step "run gemm_bf16_sm80 (5 shapes x 3 dists; built for the device arch)" run_example gemm_bf16_sm80
    step "run kmeans_assign (5 shapes x 3 dists)" run_example kmeans_assign
    step "bench gemm_bf16_ws 8192^3 vs cuBLAS" cake_step 75 bench examples/gemm_bf16_ws.cake --baseline cublas --repeats "$(bench_reps)" --timeout 60
    step "bench gemm_bf16_sm80 8192^3 vs cuBLAS" cake_step 75 bench examples/gemm_bf16_sm80.cake --baseline cublas --repeats "$(bench_reps)" --timeout 60
    step "bench kmeans_assign B=32 N=65536 K=1024 D=128" cake_step 75 bench examples/kmeans_assign.cake --repeats "$(bench_reps)" --timeout 60
    step "tx_mismatch --unsafe-skip-verify: timeouts recorded, harness carries on" expect_timeouts
  fi
  printf "\n==> summary\n"
  summarize || echo "warning: the summary failed"
  tar -czf "$OUT/evidence.tar.gz" -C "$(dirname "$EVIDENCE")" "$(basename "$EVIDENCE")" 2>/dev/null || echo "warning: could not tar the evidence"

  printf '\n---- device-check steps (%ss total) ----\n' "$((SECONDS - T0))"
  for s in "${STEPS[@]}"; do echo "$s"; done
  echo "files in \$OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  # The summary table is the most useful tail of the output: print it last.
  [ -f "$OUT/summary.txt" ] && { echo; cat "$OUT/summary.txt"; }
  return "$FAILED"
}

main "$@" 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
