#!/usr/bin/env bash
# The project's test command (README "Run the tests"). On a fresh machine it first installs the
# CUDA compile toolchain (so compile-tier tests find ptxas and NVRTC), then runs every workspace
# test and the doc tests. Exits non-zero if anything fails.
#
#   bash scripts/test.sh              # everything
#   bash scripts/test.sh -E 'test(x)' # extra arguments go to the test runner (nextest or cargo test)
#
# Environment: CAKE_SKIP_TOOLCHAIN=1 runs without the CUDA toolchain (compile-tier tests then
# report themselves skipped). CI=true adds --locked (Cargo.lock must be up to date).
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
    echo "         set CAKE_SKIP_TOOLCHAIN=1 (compile-tier tests are then skipped)." >&2
    exit 1
  }
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
      run_logged cargo nextest run --workspace "${cargo_flags[@]}" --no-fail-fast "$@" || true
  fi
else
  echo "cargo-nextest not found: using cargo test"
  # --lib --bins --tests: everything but the doc tests, which have their own phase below.
  targets=(--lib --bins --tests)
  if phase "build: workspace tests" cargo test --workspace "${cargo_flags[@]}" "${targets[@]}" --no-run; then
    phase "test: workspace (cargo test)" \
      run_logged cargo test --workspace "${cargo_flags[@]}" "${targets[@]}" --no-fail-fast "$@" || true
  fi
fi
# nextest does not run doc tests; cargo test --doc does.
phase "test: doc tests" cargo test --workspace "${cargo_flags[@]}" --doc || true

phase_summary "scripts/test.sh"
# One plain closing line with the counts of the workspace run (the doc-test phase, which has no
# tests today, would otherwise print the last "0 passed").
python3 - "$RUNNER_LOG" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
# nextest: "346 tests run: 345 passed (1 slow), 1 failed, 2 skipped" (notes in parentheses).
note = r"(?: \([^)]*\))?"
m = re.findall(r"tests run: (\d+) passed" + note + r"(?:, (\d+) failed)?" + note + r"(?:, (\d+) skipped)?", text)
if m:
    p, f, sk = m[-1]
    print(f"test.sh: {p} passed, {f or 0} failed, {sk or 0} skipped")
else:
    runs = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text)
    print(f"test.sh: {sum(int(r[0]) for r in runs)} passed, {sum(int(r[1]) for r in runs)} failed, {sum(int(r[2]) for r in runs)} skipped")
PY
if [ "$CAKE_PHASES_FAILED" != 0 ]; then
  echo "test.sh: $CAKE_PHASES_FAILED phase(s) failed" >&2
  exit 1
fi
