#!/usr/bin/env bash
# The cost model's recalibration run on the H200 (one device call; no cargo there).
#
# `cake-evolve-compiler calibrate --target sm_90a --measure-only` runs the Cake IR microbenchmark
# suite (calibration/microbench/sm_90a/suite.toml) and its accuracy set (the GPU-tier corpus cases
# the suite names, at its shapes) with `cake run` — every run checked by its workload's oracle,
# timed after an L2 flush — and saves every timed run to $OUT/calibration-run.json. On the CPU
# machine, in the repository, the fit and the proposal are then:
#
#   cake-evolve-compiler calibrate --target sm_90a --from-saved calibration-run.json
#
# (on a GPU machine with the repository, plain `calibrate --target sm_90a` does both at once).
#
#   here:   cargo build --release -p cake -p cake-evolve
#           strip -o target/release/cake-device target/release/cake
#           strip -o target/release/cake-evolve-device target/release/cake-evolve-compiler
#   device: run(command="OUT=$OUT bash scripts/device-calibration.sh",
#               carry=["target/release/cake-device", "target/release/cake-evolve-device"])
#
# Environment: CAKE_BIN (default target/release/cake-device), CAKE_EVOLVE_BIN (default
# target/release/cake-evolve-device), OUT, DEADLINE (seconds, default 300), TARGET (sm_90a).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CAKE=${CAKE_BIN:-$ROOT/target/release/cake-device}
EVOLVE=${CAKE_EVOLVE_BIN:-$ROOT/target/release/cake-evolve-device}
OUT=${OUT:-/tmp/calibration-out}
DEADLINE=${DEADLINE:-300}
TARGET=${TARGET:-sm_90a}
mkdir -p "$OUT"
export CAKE_NVRTC_LIB=${CAKE_NVRTC_LIB:-/usr/local/cuda/lib64/libnvrtc.so.13}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T0=$SECONDS
"$EVOLVE" calibrate --target "$TARGET" --cake "$CAKE" --deadline "$DEADLINE" \
  --save-measurements "$OUT/calibration-run.json" --measure-only 2>&1 | tee "$OUT/calibration.log"
rc=${PIPESTATUS[0]}
echo "calibrate exited $rc after $((SECONDS - T0)) s"
exit "$rc"
