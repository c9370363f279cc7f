#!/usr/bin/env bash
# One device call on the H200 machine (no cargo there): the gpu tier of some corpus families, then
# each family's peer row (issue 19: "a peer for each new family, timed in the same H200 run").
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#   device: run(command="FAMILIES='rotary-embedding softmax-bwd' bash scripts/device-family-peers.sh",
#               carry=["target/release/cake-device"])
#   after:  cake corpus merge corpus/results/gpu-h200.json <files_at>/gpu-families.json -o corpus/results/gpu-h200.json
#
# 1. `cake corpus gate --tier gpu --family F ...` over FAMILIES, classified against the committed
#    corpus/results/gpu-h200.json; results to $OUT/gpu-families.json and .md.
# 2. Per family of FAMILIES listed in the PEERS table below: its case timed by `cake bench` at the
#    workload's headline shape (scripts/cost-accuracy-bench.py with CASES=<case>: the output checked
#    by the case's oracle), then benchmarks/torch_peer.py at the same shape, in the same call (CUDA
#    events after an L2 flush, median of 20, as `cake bench`). $OUT/peers/cost-accuracy-h200.json
#    holds the Cake times, $OUT/peers.txt the torch lines.
#
# Environment: CAKE_BIN (default target/release/cake-device), OUT (default /tmp/family-peers-out),
# FAMILIES (required, space-separated), GPU_TIER_S (cap of step 1, default 240 s).
# Without a GPU it prints a SKIP line and exits 3, measuring nothing.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
export CAKE_BIN=${CAKE_BIN:-$ROOT/target/release/cake-device}
OUT=${OUT:-/tmp/family-peers-out}
[ -n "${FAMILIES:-}" ] || { echo "error: set FAMILIES to the corpus families to run (space-separated)"; exit 1; }
# shellcheck source=scripts/common.sh
. "$ROOT/scripts/common.sh"
cake_device_preamble "nothing measured"
status=0

echo "==> corpus gpu tier: $FAMILIES"
args=()
for f in $FAMILIES; do args+=(--family "$f"); done
T0=$SECONDS
timeout --kill-after=5 "${GPU_TIER_S:-240}" "$CAKE_BIN" corpus gate --tier gpu "${args[@]}" --jobs 1 --no-progress \
  --baseline corpus/results/gpu-h200.json -o "$OUT/gpu-families.json" --report "$OUT/gpu-families.md" >"$OUT/gpu-families.log" 2>&1 || status=1
tail -n 20 "$OUT/gpu-families.log"
echo "<== corpus gpu tier: $((SECONDS - T0)) s"

# family | case timed at the headline | torch_peer.py arguments at the same shape
: >"$OUT/peers.txt"
cases=()
while IFS='|' read -r fam case peer; do
  [[ " $FAMILIES " == *" $fam "* ]] || continue
  cases+=("$case")
  echo "torch $fam $(python3 benchmarks/torch_peer.py $peer 2>&1 | tail -n 1)" | tee -a "$OUT/peers.txt"
done <<'PEERS'
rotary-embedding|rotary-embedding/sm_90a-bf16-h32x128-w4x2-p|rope --rows 8192 --cols 4096 --head-dim 128 --dtype bf16
softmax-bwd|softmax-bwd/sm_90a-bf16-c4096-w4x2-p|softmax_bwd --rows 8192 --cols 4096 --dtype bf16
layernorm-bwd|layernorm-bwd/sm_90a-bf16-c4096-w4x2-p|layernorm_bwd --rows 8192 --cols 4096 --dtype bf16
rmsnorm-bwd|rmsnorm-bwd/sm_90a-bf16-c4096-w8x2-wbf16|rmsnorm_bwd --rows 8192 --cols 4096 --dtype bf16
cross-entropy-fwd|cross-entropy-fwd/sm_90a-bf16-v32000-w4x2|cross_entropy --rows 8192 --cols 32000 --dtype bf16
fp8-quant-per-token|fp8-quant-per-token/sm_90a-bf16-e4m3-c4096-w4x2-p|fp8quant --rows 8192 --cols 4096 --dtype bf16
cross-entropy-bwd|cross-entropy-bwd/sm_90a-bf16-v32000-w4x2|cross_entropy_bwd --rows 16384 --cols 32000 --dtype bf16
topk-select|topk-select/sm_90a-f32-e256-k8-w8x2-p|topk --rows 16384 --cols 256 --k 8 --dtype f32
gemv|gemv/sm_90a-bf16-f32-n14336-k4096-w8x1|gemv --rows 14336 --cols 4096 --dtype bf16
fp8-quant-per-block|fp8-quant-per-block/sm_90a-bf16-e4m3-c7168-w8x1-p|fp8quant_block --rows 8192 --cols 7168 --dtype bf16 --fp8 e4m3
embedding-lookup|embedding-lookup/sm_90a-bf16-v128256-h4096-w4x2|embedding --rows 8192 --cols 4096 --vocab 128256 --dtype bf16
kmeans-scatter-update|kmeans-scatter-update/sm_90a-bf16-d128-k1024-w8x1-p|kmeans_scatter --rows 262144 --cols 128 --vocab 1024 --dtype bf16
attention-fwd|attention-fwd/bf16-hd128-q128-s2|attention --rows 128 --cols 4096 --head-dim 128 --dtype bf16 --backend cudnn
attention-fwd-causal|attention-fwd-causal/bf16-hd128-q128-s2|attention --rows 128 --cols 4096 --head-dim 128 --dtype bf16 --causal --backend cudnn
PEERS
if [ "${#cases[@]}" -gt 0 ]; then
  echo "==> Cake at the headline shapes: ${cases[*]}"
  CASES=$(IFS=,; echo "${cases[*]}") PROBES=0 OUT=$OUT/peers TIME_CAP_S=${PEER_CAP_S:-120} \
    bash scripts/device-cost-accuracy.sh 2>&1 | tail -n 12 || status=1
fi
exit "$status"
