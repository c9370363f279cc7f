#!/usr/bin/env bash
# The project's main job (README "Run the main job"). On a fresh machine it first sets up (CUDA
# compile toolchain from PyPI wheels, `cargo build --release`), then runs the pipeline stages over
# the programs in examples/ and prints a summary.
#
#   bash scripts/cake-main.sh                 # all of examples/*.cake
#   bash scripts/cake-main.sh a.cake b.cake   # just these programs
#
# Stages: check (parse, types, verifier), fmt --check, lower to CUDA, build cubins with NVRTC
# (ptxas facts), predict cost at the workload's headline shape, run on the GPU against the oracle
# and bench against cuBLAS (only where nvidia-smi finds a GPU), the corpus gate, and the
# compiler-evolution loop (mine → propose → gate → queue) on the bundled evidence.
# To add a stage: write a stage_* function and add it to STAGES below.
#
# Environment:
#   CAKE_BIN=PATH          use this cake binary and skip `cargo build` (e.g. a carried binary on
#                          the GPU machine, which has no cargo)
#   CAKE_SKIP_TOOLCHAIN=1  do not install the PyPI CUDA toolchain; use /usr/local/cuda if present
#   CAKE_MAIN_KEEP_CLONES=1  keep the throwaway clones the evolution stages work in (removed at
#                          exit otherwise), to review their proposals with `--repo CLONE`
# Exit status: 0 all clean, 1 findings or a failed stage, 2 set-up failed.
# Stage functions are called through STAGES and phase, which shellcheck cannot follow.
# shellcheck disable=SC2329,SC2119
set -euo pipefail
# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CAKE_ROOT"

STAGES=(stage_check stage_fmt stage_lower stage_build stage_cost stage_gpu_run stage_corpus stage_evolve_propose stage_calibrate)

if [ "$#" -gt 0 ]; then
  PROGRAMS=("$@")
else
  PROGRAMS=(examples/*.cake)
fi
[ -e "${PROGRAMS[0]}" ] || { echo "cake-main: no .cake programs found" >&2; exit 2; }

RESULTS=() # "stage  program  verdict" lines for the summary
result() { RESULTS+=("$(printf '%-8s %-40s %s' "$1" "$2" "$3")"); }

# The evolution stages work in throwaway clones under one scratch folder, removed on exit.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/cake-main.XXXXXX")
remove_scratch() {
  if [ "${CAKE_MAIN_KEEP_CLONES:-0}" = 1 ]; then
    echo "cake-main: kept the throwaway clones in $SCRATCH (CAKE_MAIN_KEEP_CLONES=1)"
  else
    rm -rf "$SCRATCH"
  fi
}
trap remove_scratch EXIT
# Where a clone's proposals can be reviewed, as the summary says it.
clone_note() {
  if [ "${CAKE_MAIN_KEEP_CLONES:-0}" = 1 ]; then
    echo "review: cake-evolve-compiler show ID --repo $1"
  else
    echo "in a throwaway clone, removed at exit; CAKE_MAIN_KEEP_CLONES=1 keeps it"
  fi
}

# ---------------------------------------------------------------------------------------------
# Set-up
# ---------------------------------------------------------------------------------------------
setup_toolchain() {
  if [ "${CAKE_SKIP_TOOLCHAIN:-0}" != 1 ] && cake_use_toolchain; then
    return 0
  fi
  # No PyPI toolchain (skipped, or no network, as on the GPU machine): fall back to a system CUDA.
  local sys=/usr/local/cuda nvrtc="" lib
  for lib in "$sys"/lib64/libnvrtc.so.* "$sys"/lib/libnvrtc.so.*; do
    [ -e "$lib" ] && { nvrtc=$lib; break; }
  done
  if [ -x "$sys/bin/ptxas" ] && [ -n "$nvrtc" ]; then
    echo "using the system CUDA toolchain in $sys"
    export CAKE_CUDA_HOME=$sys CAKE_NVRTC_LIB=$nvrtc CAKE_CUDA_LIB_DIR=${nvrtc%/*}
    export PATH="$sys/bin:$PATH"
    return 0
  fi
  echo "no CUDA toolchain: compile and GPU stages will be skipped" >&2
  [ "${CAKE_SKIP_TOOLCHAIN:-0}" = 1 ]
}

build_release() {
  if [ -n "${CAKE_BIN:-}" ]; then
    echo "CAKE_BIN=$CAKE_BIN: skipping cargo build"
  elif ! command -v cargo >/dev/null 2>&1; then
    [ -x target/release/cake ] || {
      echo "cargo not found and no target/release/cake to use; install Rust or set CAKE_BIN" >&2
      return 2
    }
    echo "cargo not found: using the existing target/release/cake"
  else
    cargo build --release || return
  fi
  CAKE=${CAKE_BIN:-$CAKE_ROOT/target/release/cake}
  # Until the CLI has its subcommands, the binary does nothing; say so instead of "all clean".
  if ! "$CAKE" --help 2>&1 | grep -qw check; then
    echo "$CAKE has no 'check' subcommand yet (cake --help does not list it)" >&2
    return 2
  fi
}

# ---------------------------------------------------------------------------------------------
# Stages. Each runs over PROGRAMS, records one result per program, returns non-zero if any failed.
# cake exit codes: 0 clean, 1 findings, 2 usage or I/O error.
# ---------------------------------------------------------------------------------------------
verdict() { # exit-code clean-word findings-word
  case "$1" in
    0) echo "$2" ;;
    1) echo "$3" ;;
    *) echo "error (exit $1)" ;;
  esac
}

stage_check() {
  local p rc bad=0
  for p in "${PROGRAMS[@]}"; do
    echo "--- cake check $p"
    if "$CAKE" check "$p"; then rc=0; else rc=$?; fi
    result check "$p" "$(verdict "$rc" clean findings)"
    [ "$rc" = 0 ] || bad=1
  done
  return "$bad"
}

stage_fmt() {
  local p rc bad=0
  for p in "${PROGRAMS[@]}"; do
    echo "--- cake fmt --check $p"
    if "$CAKE" fmt --check "$p"; then rc=0; else rc=$?; fi
    result fmt "$p" "$(verdict "$rc" canonical "not canonical (run: cake fmt $p)")"
    [ "$rc" = 0 ] || bad=1
  done
  return "$bad"
}

OUTDIR=$CAKE_ROOT/target/cake-main
mkdir -p "$OUTDIR"
stem() { local b=${1##*/}; echo "${b%.cake}"; }

# The workload's headline shape of a program (`M=8192,N=8192,K=8192`), empty when it has none.
headline() {
  local wl=${1%.cake}.workload.toml
  [ -f "$wl" ] || return 0
  python3 - "$wl" <<'PY'
import sys, tomllib
h = tomllib.load(open(sys.argv[1], "rb")).get("headline") or {}
print(",".join(f"{k}={v}" for k, v in h.items()))
PY
}

have_toolchain() { [ -n "${CAKE_NVRTC_LIB:-}" ] || [ -n "${CAKE_CUDA_HOME:-}" ]; }
have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && [ -n "$(nvidia-smi -L 2>/dev/null)" ]; }

stage_lower() {
  local p rc bad=0 out
  for p in "${PROGRAMS[@]}"; do
    out=$OUTDIR/$(stem "$p").cu
    echo "--- cake lower $p > $out"
    if "$CAKE" lower "$p" >"$out"; then rc=0; else rc=$?; fi
    result lower "$p" "$(verdict "$rc" "$(wc -l <"$out") lines of CUDA" "not lowered")"
    [ "$rc" = 0 ] || bad=1
  done
  return "$bad"
}

stage_build() {
  if ! have_toolchain; then
    echo "no CUDA toolchain: skipping NVRTC builds"
    result build "(all)" "skipped: no CUDA toolchain"
    return 0
  fi
  local p rc bad=0 dir facts
  for p in "${PROGRAMS[@]}"; do
    dir=$OUTDIR/$(stem "$p")
    echo "--- cake build $p -o $dir"
    if facts=$("$CAKE" build "$p" -o "$dir"); then rc=0; else rc=$?; fi
    echo "$facts"
    # `cake build` ends with one summary line: registers, spills, shared memory, threads.
    facts=$(echo "$facts" | tail -n 1 | sed 's/^built [^:]*: //; s/ → .*//')
    result build "$p" "$(verdict "$rc" "${facts:-built}" "build failed")"
    [ "$rc" = 0 ] || bad=1
  done
  return "$bad"
}

stage_cost() {
  local p rc bad=0 shape out
  for p in "${PROGRAMS[@]}"; do
    shape=$(headline "$p")
    if [ -z "$shape" ]; then
      result cost "$p" "skipped: no workload headline shape"
      continue
    fi
    echo "--- cake cost $p --shape $shape"
    if out=$("$CAKE" cost "$p" --shape "$shape" 2>&1); then rc=0; else rc=$?; fi
    echo "$out"
    if [ "$rc" != 0 ] && grep -q 'C100' <<<"$out"; then
      # A target without calibration predicts nothing, by design (no borrowed numbers).
      result cost "$p" "not calibrated for its target (no prediction, by design)"
      continue
    fi
    result cost "$p" "$(verdict "$rc" "$(grep -m1 -i 'bottleneck' <<<"$out" | sed 's/^ *//' || echo "predicted at $shape")" "no prediction")"
    [ "$rc" = 0 ] || bad=1
  done
  return "$bad"
}

stage_gpu_run() {
  if ! have_gpu; then
    echo "no GPU found (nvidia-smi missing or lists none): skipping GPU runs"
    result gpu-run "(all)" "skipped: no GPU"
    return 0
  fi
  echo "GPU found: $(nvidia-smi -L)"
  local p rc bad=0
  for p in "${PROGRAMS[@]}"; do
    [ -f "${p%.cake}.workload.toml" ] || { result gpu-run "$p" "skipped: no workload"; continue; }
    echo "--- cake run $p (workload shapes x distributions, oracle, timings)"
    if "$CAKE" run "$p"; then rc=0; else rc=$?; fi
    result gpu-run "$p" "$(verdict "$rc" "every run matches the oracle" "a run failed (see records)")"
    [ "$rc" = 0 ] || bad=1
    echo "--- cake bench $p (headline shape, against cuBLAS where the workload names it)"
    "$CAKE" bench "$p" || bad=1
  done
  return "$bad"
}

stage_corpus() {
  local tiers=(--tier static)
  have_toolchain && tiers+=(--tier compile)
  have_gpu && tiers+=(--tier gpu)
  echo "--- cake corpus gate ${tiers[*]} --baseline corpus/results/baseline.json"
  if "$CAKE" corpus gate "${tiers[@]}" --baseline corpus/results/baseline.json --no-progress \
    -o "$OUTDIR/corpus-results.json" --report "$OUTDIR/corpus-report.md"; then
    result corpus "corpus/" "no regression (report: target/cake-main/corpus-report.md)"
  else
    result corpus "corpus/" "regressions (see target/cake-main/corpus-report.md)"
    return 1
  fi
}

# The compiler-evolution loop, offline, on the bundled evidence (records of real broken
# candidates run through the harness on the H200). It runs in a throwaway clone, so this
# repository gets no branches and no queue records: mine → propose (rule proposals on
# evolve/* branches, each gated by the corpus and principles P1–P8) → the review queue.
stage_evolve_propose() {
  local evolve=${CAKE_EVOLVE_BIN:-$CAKE_ROOT/target/release/cake-evolve-compiler}
  if [ ! -x "$evolve" ]; then
    echo "no cake-evolve-compiler binary at $evolve: skipping (set CAKE_EVOLVE_BIN)"
    result propose "(all)" "skipped: no cake-evolve-compiler"
    return 0
  fi
  local clone=$SCRATCH/propose store=$CAKE_ROOT/evolution/evidence/bundle
  git clone -q "$CAKE_ROOT" "$clone" || { result propose "(all)" "clone failed"; return 1; }
  echo "--- cake-evolve-compiler mine --store evolution/evidence/bundle"
  "$evolve" mine --store "$store" --top 8 || true
  # `mine` just printed the mining warnings (M002: superseded records); propose would repeat them.
  echo "--- cake-evolve-compiler propose (in a throwaway clone: $clone)"
  if "$evolve" propose --repo "$clone" --evidence "$store" --tier static --no-progress --no-mine-warnings; then
    echo "--- cake-evolve-compiler list"
    "$evolve" list --repo "$clone"
    result propose "evolution/evidence/bundle" "proposals queued ($(clone_note "$clone"))"
  else
    result propose "evolution/evidence/bundle" "proposals queued, some gates failed (see above)"
  fi
}

# The cost model's recalibration loop: with a GPU, `calibrate` runs the Cake IR microbenchmark
# suite and its corpus accuracy set and queues the fit; without one it refits from the newest
# committed H200 run (calibration/runs/) — either way in a throwaway clone.
stage_calibrate() {
  local evolve=${CAKE_EVOLVE_BIN:-$CAKE_ROOT/target/release/cake-evolve-compiler}
  if [ ! -x "$evolve" ]; then
    result calibrate "sm_90a" "skipped: no cake-evolve-compiler"
    return 0
  fi
  local clone=$SCRATCH/calibrate saved out rc args=()
  git clone -q "$CAKE_ROOT" "$clone" || { result calibrate "sm_90a" "clone failed"; return 1; }
  if have_gpu; then
    echo "--- cake-evolve-compiler calibrate --target sm_90a (GPU: running the suite, in $clone)"
  else
    # The newest run by its own timestamp (a clone's file times say nothing).
    saved=$(for f in "$CAKE_ROOT"/calibration/runs/sm_90a-*.json; do
      [ -f "$f" ] && printf '%s %s\n' "$(grep -m1 -o '"created_unix": [0-9]*' "$f" | grep -o '[0-9]*$')" "$f"
    done | sort -n | tail -n 1 | cut -d' ' -f2-)
    if [ -z "$saved" ]; then
      result calibrate "sm_90a" "skipped: no GPU and no saved run in calibration/runs/"
      return 0
    fi
    echo "--- no GPU: cake-evolve-compiler calibrate --target sm_90a --from-saved ${saved#"$CAKE_ROOT"/} (in $clone)"
    args=(--from-saved "$saved")
  fi
  # `calibrate` prints `queued ID ...` for a new fit, `not fitted: ...` for a run decided before.
  if out=$("$evolve" calibrate --repo "$clone" --target sm_90a --tier static "${args[@]}"); then rc=0; else rc=$?; fi
  echo "$out"
  if [ "$rc" != 0 ]; then
    result calibrate "sm_90a" "calibrate failed, exit $rc (see above)"
    return 1
  elif grep -q '^not fitted' <<<"$out"; then
    result calibrate "sm_90a" "not fitted: the newest run was fitted and decided before (see above); a GPU run measures anew"
  elif grep -q '^queued ' <<<"$out"; then
    result calibrate "sm_90a" "fitted; the proposal is queued ($(clone_note "$clone"))"
  else
    result calibrate "sm_90a" "calibrate said neither queued nor not fitted (see above)"
    return 1
  fi
}

# ---------------------------------------------------------------------------------------------
status=0
phase "setup: CUDA toolchain" setup_toolchain || { phase_summary "scripts/cake-main.sh"; exit 2; }
phase "setup: cargo build --release" build_release || { phase_summary "scripts/cake-main.sh"; exit 2; }
for stage in "${STAGES[@]}"; do
  phase "stage: ${stage#stage_}" "$stage" || status=1
done

printf '\n---- results (%s programs) ----\n' "${#PROGRAMS[@]}"
for line in "${RESULTS[@]}"; do echo "$line"; done
phase_summary "scripts/cake-main.sh"
if [ "$status" = 0 ]; then echo "cake-main: all clean"; else echo "cake-main: some stages reported findings or failed" >&2; fi
exit "$status"
