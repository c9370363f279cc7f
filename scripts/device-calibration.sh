#!/usr/bin/env bash
# Timed runs for the cost model's calibration, on the H200 (one device call, no cargo there).
#
# Every GPU-tier GEMM case of the corpus (sm_90a and sm_80 programs) runs at two shapes large
# enough to be past launch overhead; each run is checked against the oracle and timed (median of
# 5 after an L2 flush). The records go to $OUT/calibration-runs.tar.gz; on the CPU machine,
# `scripts/calibration-measurements.py` turns them into the measurements file that
# `cake-evolve-compiler calibrate --target sm_90a --measurements FILE` fits.
#
# Environment: CAKE_BIN (default target/release/cake-device), OUT, DEADLINE (seconds, default 300).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CAKE=${CAKE_BIN:-$ROOT/target/release/cake-device}
OUT=${OUT:-/tmp/calibration-out}
DEADLINE=${DEADLINE:-300}
mkdir -p "$OUT"
export CAKE_NVRTC_LIB=${CAKE_NVRTC_LIB:-/usr/local/cuda/lib64/libnvrtc.so.13}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=$(mktemp -d)
EVIDENCE=$WORK/evidence
mkdir -p "$WORK/cases" "$EVIDENCE"
T0=$SECONDS

cases=$("$CAKE" corpus list --cases | awk '$2 ~ /^sm_(90a|80)$/ && $4 ~ /gpu/ && $1 ~ /^gemm-/ {print $1}')
echo "calibration cases: $(echo "$cases" | wc -w)"
n=0
for id in $cases; do
  if [ $((SECONDS - T0)) -ge "$DEADLINE" ]; then
    echo "deadline reached after $n cases"
    break
  fi
  file=$WORK/cases/${id//\//__}.cake
  "$CAKE" corpus show "$id" >"$file" || { echo "skip $id: corpus show failed"; continue; }
  # The corpus GEMMs share the example's tensor names and dims, so its workload (oracle, inputs,
  # tolerance) applies under the case's kernel name; only the shapes are chosen here.
  kernel=$(awk '$1 == "kernel" {print $2; exit}' "$file")
  workload=${file%.cake}.workload.toml
  sed "s/^kernel = .*/kernel = \"$kernel\"/" examples/gemm_bf16_ws.workload.toml >"$workload"
  "$CAKE" run "$file" --workload "$workload" \
    --shape M=4096,N=4096,K=4096 --shape M=2048,N=2048,K=8192 --dist normal \
    --repeats 5 --timeout 60 --no-cublas-check --evidence "$EVIDENCE" 2>&1 | tail -n 4
  n=$((n + 1))
done
echo "ran $n cases in $((SECONDS - T0)) s"
tar czf "$OUT/calibration-runs.tar.gz" -C "$WORK" evidence cases
ls -la "$OUT"
