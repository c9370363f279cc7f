#!/usr/bin/env bash
# The project's test command (README "Run the tests"). On a fresh machine it first installs the
# CUDA compile toolchain (so compile-tier tests find ptxas and NVRTC), then runs every workspace
# test and the doc tests. Exits non-zero if anything fails.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh -E 'test(x)' # extra arguments go to the test runner (nextest or cargo test)
#
# Tests that need something a machine may lack say so in their names: `needs_gpu_*` (a GPU, and
# the toolchain), `needs_toolchain_*` (ptxas and NVRTC), `needs_no_gpu_*` (a machine without a
# GPU), `needs_chromium_*` (headless Chromium: the review page's browser test; installed from
# Debian's packages when absent and apt-get is usable), `needs_slurm_*` (a one-node Slurm cluster
# on loopback that the test starts: root, and Debian's slurm-wlm and munge, installed the same
# way). This script leaves out, by name (`--skip`),
# those whose resource it does not find here, so the runner counts them skipped; a test that does
# run without its resource fails. It prints one line saying what it left out and why, then the
# closing counts line.
#
# Environment: CAKE_SKIP_TOOLCHAIN=1 runs without the CUDA toolchain (the needs_toolchain_ and
# needs_gpu_ tests are then skipped). CAKE_TEST_GPU=1 or 0 says whether this machine has a GPU
# (default: whether `nvidia-smi -L` lists one); it is exported to the tests. CAKE_SKIP_CHROMIUM=1
# does not install Chromium (the needs_chromium_ tests are then skipped unless it is there).
# CAKE_SKIP_SLURM=1 neither installs Slurm nor runs the needs_slurm_ tests.
# CI=true adds --locked (Cargo.lock must be up to date).
set -euo pipefail
# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$CAKE_ROOT"

if [ "${CAKE_SKIP_TOOLCHAIN:-0}" = 1 ]; then
  echo "CAKE_SKIP_TOOLCHAIN=1: running without the CUDA toolchain"
else
  phase "setup: CUDA toolchain" cake_use_toolchain || {
    phase_summary
    echo "test.sh: the CUDA toolchain set-up failed (see above). To run the tests without it," >&2
    echo "         set CAKE_SKIP_TOOLCHAIN=1 (the tests that need it are then skipped)." >&2
    exit 1
  }
fi

# The browser test drives Debian's headless Chromium, the Slurm test Debian's slurm-wlm and munge:
# install them when absent and apt-get can (root, or passwordless sudo), quietly and within 10
# minutes. A failed install is not a failed run: the tests are skipped.
can_apt() { command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; }
apt_install() {
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" timeout 600 apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 \
    || { "${sudo[@]}" timeout 300 apt-get update >/dev/null 2>&1 && "${sudo[@]}" timeout 600 apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1; }
}
if [ -z "${CAKE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 && [ "${CAKE_SKIP_CHROMIUM:-0}" != 1 ] && can_apt; then
  echo "setup: installing chromium (apt-get) for the review page's browser test"
  apt_install chromium || echo "setup: apt-get could not install chromium; the needs_chromium_ tests are skipped"
fi
# Everything the Slurm test runs (compiler/tests/slurm_loopback.rs looks each up on PATH).
have_slurm() {
  local t
  for t in munged slurmctld slurmd sbatch squeue scontrol sinfo scancel; do command -v "$t" >/dev/null 2>&1 || return 1; done
}
if [ "${CAKE_SKIP_SLURM:-0}" != 1 ] && [ "$(id -u)" = 0 ] && ! have_slurm && can_apt; then
  echo "setup: installing slurm-wlm and munge (apt-get) for the Slurm loopback test"
  apt_install slurm-wlm munge || echo "setup: apt-get could not install slurm-wlm and munge; the needs_slurm_ tests are skipped"
fi

# What this machine has, and so which tests it leaves out (test names, matched as substrings).
if [ -z "${CAKE_TEST_GPU:-}" ]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then CAKE_TEST_GPU=1; else CAKE_TEST_GPU=0; fi
fi
export CAKE_TEST_GPU
left_out=() # "PATTERN|WHY"
if [ "${CAKE_SKIP_TOOLCHAIN:-0}" = 1 ]; then
  left_out+=("needs_toolchain_|need the CUDA toolchain (CAKE_SKIP_TOOLCHAIN=1)")
  left_out+=("needs_gpu_|need a GPU and the CUDA toolchain (CAKE_SKIP_TOOLCHAIN=1)")
elif [ ! -f "${CAKE_NVRTC_LIB:-}" ] || ! command -v ptxas >/dev/null 2>&1; then
  left_out+=("needs_toolchain_|need the CUDA toolchain (NVRTC or ptxas not found after set-up)")
  left_out+=("needs_gpu_|need a GPU and the CUDA toolchain (NVRTC or ptxas not found after set-up)")
elif [ "$CAKE_TEST_GPU" != 1 ]; then
  left_out+=("needs_gpu_|need a GPU (no GPU on this machine)")
fi
if [ "$CAKE_TEST_GPU" = 1 ]; then
  left_out+=("needs_no_gpu_|need a machine without a GPU (this one has one)")
fi
if [ -z "${CAKE_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  left_out+=("needs_chromium_|need headless Chromium (not installed, and apt-get could not install it or CAKE_SKIP_CHROMIUM=1)")
fi
if [ "${CAKE_SKIP_SLURM:-0}" = 1 ]; then
  left_out+=("needs_slurm_|need a Slurm cluster on loopback (CAKE_SKIP_SLURM=1)")
elif [ "$(id -u)" != 0 ]; then
  left_out+=("needs_slurm_|need root to start a Slurm cluster on loopback (slurmd runs the jobs)")
elif ! have_slurm; then
  left_out+=("needs_slurm_|need Slurm and munge (not on PATH, and apt-get could not install slurm-wlm and munge)")
fi
# The runner's arguments: the caller's, then `--skip PATTERN` for each left-out name (after the
# caller's `--` if there is one). Both runners intersect them with the caller's own filters.
runner_args=("$@")
if [ "${#left_out[@]}" != 0 ]; then
  sep=0
  for a in "$@"; do [ "$a" = -- ] && sep=1; done
  [ "$sep" = 1 ] || runner_args+=(--)
  for l in "${left_out[@]}"; do runner_args+=(--skip "${l%%|*}"); done
fi

cargo_flags=()
if [ "${CI:-}" = true ]; then
  cargo_flags+=(--locked)
  export CARGO_INCREMENTAL=0 # a clean build gains nothing from incremental artifacts
fi

# The runner's output is kept so the closing line can count what ran (see the end).
RUNNER_LOG=$(mktemp)
trap 'rm -f "$RUNNER_LOG"' EXIT
run_logged() { set -o pipefail; "$@" 2>&1 | tee -a "$RUNNER_LOG"; }

if cargo nextest --version >/dev/null 2>&1; then
  if phase "build: workspace tests" cargo nextest run --workspace "${cargo_flags[@]}" --no-run; then
    phase "test: workspace (cargo nextest)" \
      run_logged cargo nextest run --workspace "${cargo_flags[@]}" --no-fail-fast "${runner_args[@]}" || true
  fi
  # How many tests each left-out name covers (the oneline list: "BINARY TEST" per line).
  count_named() { cargo nextest list --workspace "${cargo_flags[@]}" --message-format oneline 2>/dev/null | grep -c -- "$1" || true; }
  count_ignored() { cargo nextest list --workspace "${cargo_flags[@]}" --run-ignored only --message-format oneline 2>/dev/null | grep -c . || true; }
else
  echo "cargo-nextest not found: using cargo test"
  # --lib --bins --tests: everything but the doc tests, which have their own phase below.
  targets=(--lib --bins --tests)
  if phase "build: workspace tests" cargo test --workspace "${cargo_flags[@]}" "${targets[@]}" --no-run; then
    phase "test: workspace (cargo test)" \
      run_logged cargo test --workspace "${cargo_flags[@]}" "${targets[@]}" --no-fail-fast "${runner_args[@]}" || true
  fi
  # How many tests each left-out name covers ("NAME: test" per line of --list).
  count_named() { cargo test --workspace "${cargo_flags[@]}" "${targets[@]}" -q -- --list 2>/dev/null | grep -- "$1" | grep -c ': test$' || true; }
  count_ignored() { cargo test --workspace "${cargo_flags[@]}" "${targets[@]}" -q -- --list --ignored 2>/dev/null | grep -c ': test$' || true; }
fi
# nextest does not run doc tests; cargo test --doc does.
phase "test: doc tests" cargo test --workspace "${cargo_flags[@]}" --doc || true

phase_summary "scripts/test.sh"
# One line saying which tests were left out or are #[ignore]d (the runner counts both skipped)
# and why.
why=""
for l in "${left_out[@]}"; do
  why+="${why:+; }$(count_named "${l%%|*}") tests that ${l#*|}, named ${l%%|*}*"
done
ignored=$(count_ignored)
[ "$ignored" = 0 ] || why+="${why:+; }$ignored #[ignore]d tests (development tools)"
[ -z "$why" ] || echo "test.sh: skipped $why"
# One plain closing line with the counts of the workspace run (the doc-test phase, which has no
# tests today, would otherwise print the last "0 passed").
python3 - "$RUNNER_LOG" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
# nextest: "346 tests run: 345 passed (1 slow), 1 failed, 2 skipped" (notes in parentheses; "1 test run" when one ran).
note = r"(?: \([^)]*\))?"
m = re.findall(r"tests? run: (\d+) passed" + note + r"(?:, (\d+) failed)?" + note + r"(?:, (\d+) skipped)?", text)
if m:
    p, f, sk = m[-1]
    print(f"test.sh: {p} passed, {f or 0} failed, {sk or 0} skipped")
else:
    # cargo test: "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 3 filtered out";
    # the ignored and the filtered-out tests (those left out above) are the skipped ones.
    runs = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured; (\d+) filtered out", text)
    skipped = sum(int(r[2]) + int(r[3]) for r in runs)
    print(f"test.sh: {sum(int(r[0]) for r in runs)} passed, {sum(int(r[1]) for r in runs)} failed, {skipped} skipped")
PY
if [ "$CAKE_PHASES_FAILED" != 0 ]; then
  echo "test.sh: $CAKE_PHASES_FAILED phase(s) failed" >&2
  exit 1
fi
