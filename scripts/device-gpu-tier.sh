#!/usr/bin/env bash
# One device call (no cargo there): first the gpu tier and torch peer rows of PEER_FAMS (through
# scripts/device-family-peers.sh), then the whole corpus gpu tier in SHARDS shards, each shard's
# results written straight into $OUT so that a call cut short keeps what finished. Merge the
# shards here: `cake corpus merge <files_at>/gpu-shard-*-of-N.json -o corpus/results/gpu-h200.json`
# (an H200 run) and record its wall time (the shards' sum) in benchmarks/RESULTS.md.
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#   device: run(command="SHARDS=2 PEER_FAMS='embedding-lookup kmeans-scatter-update attention-fwd-causal' bash scripts/device-gpu-tier.sh",
#               carry=["target/release/cake-device"])
#
# Environment: CAKE_BIN (default target/release/cake-device), OUT (default /tmp/gpu-tier-out),
# SHARDS (2), RUN_SHARDS (which of them, default all), JOBS (4: the runtime's timing lock keeps
# the kernels' timings one at a time per GPU), SHARD_CAP_S (280 s each), STOP_AFTER (no new step
# after this many seconds, default 400), PEER_FAMS (families whose peer rows to time first).
# Without a GPU it prints a SKIP line and exits 3, measuring nothing.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
export CAKE_BIN=${CAKE_BIN:-$ROOT/target/release/cake-device}
OUT=${OUT:-/tmp/gpu-tier-out}
# shellcheck source=scripts/common.sh
. "$ROOT/scripts/common.sh"
cake_device_preamble "nothing measured"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
T0=$SECONDS
for f in ${PEER_FAMS:-}; do
  [ $((SECONDS - T0)) -lt "${STOP_AFTER:-400}" ] || { echo "stopped before family $f at $((SECONDS - T0)) s"; break; }
  FAMILIES=$f GPU_TIER_S=90 PEER_CAP_S=60 OUT=/tmp/fam-$f bash scripts/device-family-peers.sh >"/tmp/fam-$f.log" 2>&1
  echo "family $f exit $? after $((SECONDS - T0)) s"
  tail -n 15 "/tmp/fam-$f.log"
  # One file back per family (the device returns a limited number of files).
  tar czf "$OUT/fam-$f.tgz" -C /tmp "fam-$f" "fam-$f.log"
done
N=${SHARDS:-2}
for i in ${RUN_SHARDS:-$(seq 1 "$N")}; do
  [ $((SECONDS - T0)) -lt "${STOP_AFTER:-400}" ] || { echo "stopped before shard $i at $((SECONDS - T0)) s"; break; }
  s=$SECONDS
  timeout --kill-after=5 "${SHARD_CAP_S:-280}" "$CAKE_BIN" corpus gate --tier gpu --shard "$i/$N" --jobs "${JOBS:-4}" --no-progress \
    -o "$OUT/gpu-shard-$i-of-$N.json" --report "$OUT/gpu-shard-$i-of-$N.md" >"/tmp/shard-$i.log" 2>&1
  echo "shard $i/$N exit $? in $((SECONDS - s)) s"
  tail -n 3 "/tmp/shard-$i.log"
done
echo "total $((SECONDS - T0)) s"
