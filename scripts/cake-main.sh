#!/usr/bin/env bash
# The project's main job (README "Run the main job"). On a fresh machine it first sets up (CUDA
# compile toolchain from PyPI wheels, `cargo build --release`), then runs the pipeline stages over
# the programs in examples/ and prints a summary.
#
#   bash scripts/cake-main.sh                 # all of examples/*.cake
#   bash scripts/cake-main.sh a.cake b.cake   # just these programs
#
# Stages today: check, fmt --check. Stages planned (they say so when reached): lower to CUDA,
# build cubins with NVRTC, run on the GPU (only where nvidia-smi finds one), evolution `propose`.
# To add a stage: write a stage_* function and add it to STAGES below.
#
# Environment:
#   CAKE_BIN=PATH          use this cake binary and skip `cargo build` (e.g. a carried binary on
#                          the GPU machine, which has no cargo)
#   CAKE_SKIP_TOOLCHAIN=1  do not install the PyPI CUDA toolchain; use /usr/local/cuda if present
# Exit status: 0 all clean, 1 findings or a failed stage, 2 set-up failed.
# Stage functions are called through STAGES and phase, which shellcheck cannot follow.
# shellcheck disable=SC2329,SC2119
set -euo pipefail
# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CAKE_ROOT"

STAGES=(stage_check stage_fmt stage_lower stage_build stage_gpu_run stage_evolve_propose)

if [ "$#" -gt 0 ]; then
  PROGRAMS=("$@")
else
  PROGRAMS=(examples/*.cake)
fi
[ -e "${PROGRAMS[0]}" ] || { echo "cake-main: no .cake programs found" >&2; exit 2; }

RESULTS=() # "stage  program  verdict" lines for the summary
result() { RESULTS+=("$(printf '%-8s %-40s %s' "$1" "$2" "$3")"); }

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

planned() { echo "not built yet: $1"; result "$2" "(all)" "skipped: not built yet"; }

stage_lower() { planned "cake lower (Cake IR -> CUDA C++ with inline PTX)" lower; }

stage_build() { planned "cake build (NVRTC -> cubin, ptxas resource report)" build; }

stage_gpu_run() {
  local gpus
  if command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null) && [ -n "$gpus" ]; then
    echo "GPU found: $gpus"
    planned "GPU runs against the oracle, with timings" gpu-run
  else
    echo "no GPU found (nvidia-smi missing or lists none): skipping GPU runs"
    result gpu-run "(all)" "skipped: no GPU"
  fi
}

stage_evolve_propose() { planned "cake-evolve-compiler propose (evidence -> compiler proposals)" propose; }

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
