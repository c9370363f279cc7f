# shellcheck shell=bash
# Shared helpers for scripts/*.sh and .ci/run. Source it (bash); it runs nothing by itself.
#
#   phase NAME CMD [ARGS...]   run CMD as a named, timed phase; returns CMD's exit status
#   phase_summary              print every phase with its time and status, and the total
#   cake_use_toolchain         run scripts/setup-cuda-toolchain.sh and source its env.sh
#   cake_skip_without_gpu WHY  print "SKIP: no NVIDIA GPU ...; WHY" and exit 3 when no /dev/nvidia<N> exists

CAKE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CAKE_PHASES=()
CAKE_PHASES_FAILED=0
_cake_t0=${EPOCHREALTIME:-$SECONDS}

_cake_now() { echo "${EPOCHREALTIME:-$SECONDS}"; }
# Seconds between two timestamps, one decimal ("12.3").
_cake_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

phase() {
  local name=$1 start rc secs
  shift
  printf '\n==> %s\n' "$name"
  start=$(_cake_now)
  if "$@"; then rc=0; else rc=$?; fi
  secs=$(_cake_elapsed "$start" "$(_cake_now)")
  if [ "$rc" = 0 ]; then
    printf '<== %s: ok (%ss)\n' "$name" "$secs"
    CAKE_PHASES+=("$(printf '%8ss  ok      %s' "$secs" "$name")")
  else
    printf '<== %s: FAILED, exit %s (%ss)\n' "$name" "$rc" "$secs"
    CAKE_PHASES+=("$(printf '%8ss  FAILED  %s (exit %s)' "$secs" "$name" "$rc")")
    CAKE_PHASES_FAILED=$((CAKE_PHASES_FAILED + 1))
  fi
  return "$rc"
}

phase_summary() {
  local line
  printf '\n%s\n' "---- ${1:-timings} ----"
  for line in "${CAKE_PHASES[@]}"; do echo "$line"; done
  printf '%8ss  total\n' "$(_cake_elapsed "$_cake_t0" "$(_cake_now)")"
}

cake_use_toolchain() {
  bash "$CAKE_ROOT/scripts/setup-cuda-toolchain.sh" "$@" || return
  # shellcheck disable=SC1091
  . "$CAKE_ROOT/.toolchain/cuda/env.sh"
}

# Device scripts measure nothing without a GPU (no fake data): the SKIP line ends with what was
# not done, and the exit status 3 tells the caller it was skipped, not passed.
cake_skip_without_gpu() {
  local devs
  shopt -s nullglob
  devs=(/dev/nvidia[0-9]*)
  shopt -u nullglob
  if [ "${#devs[@]}" -eq 0 ]; then
    echo "SKIP: no NVIDIA GPU on this machine (no /dev/nvidia[0-9]*); $1"
    exit 3
  fi
}

# The start of a device script that runs a carried `cake` binary: SKIP (exit 3) without a GPU,
# saying what was not done ($1); an error without $CAKE_BIN; $OUT created; NVRTC and the CUDA
# libraries of the device's CUDA installation on the paths the runtime loads them from.
cake_device_preamble() {
  cake_skip_without_gpu "$1"
  [ -x "$CAKE_BIN" ] || { echo "error: no cake binary at $CAKE_BIN (build it here and carry it: see the head of $0)"; exit 1; }
  mkdir -p "$OUT"
  export CAKE_NVRTC_LIB=${CAKE_NVRTC_LIB:-/usr/local/cuda/lib64/libnvrtc.so.13}
  export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
