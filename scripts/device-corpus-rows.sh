#!/usr/bin/env bash
# One device call on the H200 machine (no cargo there): the corpus gpu tier, then the row kernels
# timed against torch on the same machine.
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#   device: run(command="bash scripts/device-corpus-rows.sh", carry=["target/release/cake-device"])
#
# 1. `cake corpus gate --tier gpu` over every case that lists the gpu tier, classified against the
#    committed corpus/results/gpu-h200.json (new cases show as new-pass / new-fail); the results
#    go to $OUT/gpu-h200.json (commit it as corpus/results/gpu-h200.json) and $OUT/gpu-h200.md,
#    its run records to $OUT/corpus-evidence.tar.gz.
# 2. `cake bench` of corpus row kernels (softmax, rmsnorm persistent and not, layernorm; bf16, C = 4096) at
#    R = ROWS (default 16384), each output checked by its fp64 oracle, then
#    benchmarks/torch_peer.py timing torch's op at the same shape (CUDA events after an L2 flush,
#    median of 20, as `cake bench`). Lines `bench ...` and `torch {...}` go to $OUT/rows.txt.
#
# Environment: CAKE_BIN (default target/release/cake-device), OUT (default /tmp/corpus-rows-out),
# ROWS, GPU_TIER_S (cap of step 1, default 330 s).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CAKE=${CAKE_BIN:-$ROOT/target/release/cake-device}
OUT=${OUT:-/tmp/corpus-rows-out}
ROWS=${ROWS:-16384}
mkdir -p "$OUT"
export CAKE_NVRTC_LIB=${CAKE_NVRTC_LIB:-/usr/local/cuda/lib64/libnvrtc.so.13}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L || true
status=0

echo "==> corpus gpu tier"
T0=$SECONDS
timeout --kill-after=5 "${GPU_TIER_S:-330}" "$CAKE" corpus gate --tier gpu --jobs 1 --no-progress \
  --baseline corpus/results/gpu-h200.json -o "$OUT/gpu-h200.json" --report "$OUT/gpu-h200.md" >"$OUT/gpu-tier.log" 2>&1 || status=1
tail -n 25 "$OUT/gpu-tier.log"
# The gate's run records (with the cost model's prediction of each run): import them here with
# `cake-evolve-compiler import --kind run` so `mine` / `propose` see the mispredictions.
tar -C target/corpus -czf "$OUT/corpus-evidence.tar.gz" evidence 2>/dev/null || echo "no corpus run records to save"
echo "<== corpus gpu tier: $((SECONDS - T0)) s"

echo "==> row kernels against torch (R = $ROWS)"
W=$(mktemp -d)
: >"$OUT/rows.txt"
# case id | oracle | torch op | extra workload line
while IFS='|' read -r case oracle op extra; do
  name=${case//\//_}
  "$CAKE" corpus show "$case" >"$W/$name.cake" || { status=1; continue; }
  printf 'oracle = "%s"\nheadline = { R = %s }\nshapes = [{ R = %s }]\n%s\n' "$oracle" "$ROWS" "$ROWS" "$extra" >"$W/$name.workload.toml"
  timeout 120 "$CAKE" bench "$W/$name.cake" --workload "$W/$name.workload.toml" --baseline none \
    --evidence "$W/evidence" 2>&1 | tee "$W/$name.log" | tail -n 6
  echo "bench $case: $(grep -E '^R=' "$W/$name.log" | tr -s ' ')" >>"$OUT/rows.txt"
  echo "torch $(python3 benchmarks/torch_peer.py "$op" --rows "$ROWS" --cols 4096 --dtype bf16 2>&1 | tail -n 1)" | tee -a "$OUT/rows.txt"
done <<'CASES'
softmax/sm_90a-bf16-c4096-w4x2|softmax|softmax|
rmsnorm/sm_90a-bf16-c4096-w4x2-p|rmsnorm|rmsnorm|scalars = { eps = 1e-5 }
rmsnorm/sm_90a-bf16-c4096-w8x2-wbf16|rmsnorm|rmsnorm|scalars = { eps = 1e-5 }
layernorm/sm_90a-bf16-c4096-w4x2-p|layernorm|layernorm|scalars = { eps = 1e-5 }
CASES
tar -C "$W" -czf "$OUT/rows-evidence.tar.gz" evidence 2>/dev/null || true
exit "$status"
