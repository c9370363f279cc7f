#!/usr/bin/env bash
# Runs the corpus gate across a Slurm cluster: submits scripts/slurm/corpus-gate.sbatch as an array
# of CAKE_SHARDS tasks (one `cake corpus gate --shard I/N` each), then
# scripts/slurm/corpus-merge.sbatch as a job that starts when every task has succeeded
# (`--dependency=afterok:`) and joins their results. Slurm does the scheduling; this script only
# checks the set-up and submits. Run it from (or with CAKE_ROOT set to) a Cake checkout that every
# host sees at the same path.
#
#   CAKE_SHARDS=8 CAKE_OUT_DIR=/shared/gate bash scripts/slurm/corpus-gate.sh
#   CAKE_TIERS=static CAKE_GATE_ARGS="--family softmax" CAKE_SLURM_WAIT=1 bash scripts/slurm/corpus-gate.sh
#
# Environment:
#   CAKE_SHARDS       number of array tasks / shards (default 4)
#   CAKE_OUT_DIR      directory for shard-I-of-N.json/.md, merged.json/.md and the Slurm logs
#                     (default: $CAKE_ROOT/target/corpus/slurm)
#   CAKE_TIERS        tiers, separated by spaces or commas (default "static compile")
#   CAKE_GATE_ARGS    further `cake corpus gate` arguments for every shard ("--family softmax")
#   CAKE_BASELINE     results file the merge classifies against (default: none, any failure fails)
#   CAKE              the cake binary (default: $CAKE_ROOT/target/release/cake)
#   CAKE_ROOT         the checkout (default: the one holding this script)
#   CAKE_SBATCH_ARGS  further sbatch arguments for both jobs ("--partition=cpu --time=30")
#   CAKE_SLURM_WAIT=1 wait for the merge job and exit with its status (sbatch --wait)
#
# Prints the two job ids ("array job 12", "merge job 13") and where the results will be. Exit
# status: 0 submitted (with CAKE_SLURM_WAIT=1: the merged gate passed); 1 the merged gate failed
# (CAKE_SLURM_WAIT=1); 2 bad set-up or a refused submission (the message says what to do).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() {
  echo "corpus-gate.sh: $*" >&2
  exit 2
}

CAKE_ROOT=${CAKE_ROOT:-$(cd "$here/../.." && pwd)}
[ -d "$CAKE_ROOT/corpus" ] || die "no corpus/ in CAKE_ROOT=$CAKE_ROOT: set CAKE_ROOT to a Cake checkout"
CAKE_SHARDS=${CAKE_SHARDS:-4}
case "$CAKE_SHARDS" in
  '' | *[!0-9]* | 0 | 0*) die "CAKE_SHARDS must be a positive integer (got '$CAKE_SHARDS')" ;;
esac
CAKE=${CAKE:-$CAKE_ROOT/target/release/cake}
[ -x "$CAKE" ] || die "no cake binary at $CAKE: run \`cargo build --release\` in $CAKE_ROOT, or set CAKE to one every host can run"
CAKE_TIERS=${CAKE_TIERS:-static compile}
for t in ${CAKE_TIERS//,/ }; do
  case "$t" in
    static | compile | gpu) ;;
    *) die "CAKE_TIERS: unknown tier '$t' (tiers: static, compile, gpu)" ;;
  esac
done
# shellcheck disable=SC2206 # word-splitting the extra arguments is the point
extra=(${CAKE_GATE_ARGS:-})
for a in "${extra[@]}"; do
  case "$a" in
    --shard | --shard=* | -o | --out | --out=* | --report | --report=* | --bless)
      die "CAKE_GATE_ARGS must not hold $a: the array sets --shard, -o and --report per task (and a sharded run cannot --bless)" ;;
  esac
done
CAKE_OUT_DIR=${CAKE_OUT_DIR:-$CAKE_ROOT/target/corpus/slurm}
mkdir -p "$CAKE_OUT_DIR" || die "cannot create CAKE_OUT_DIR=$CAKE_OUT_DIR"
CAKE_OUT_DIR=$(cd "$CAKE_OUT_DIR" && pwd)
if [ -n "${CAKE_BASELINE:-}" ]; then
  [ -f "$CAKE_BASELINE" ] || die "CAKE_BASELINE=$CAKE_BASELINE does not exist"
  CAKE_BASELINE=$(cd "$(dirname "$CAKE_BASELINE")" && pwd)/$(basename "$CAKE_BASELINE")
fi
command -v sbatch >/dev/null 2>&1 \
  || die "sbatch not found: run this on a host of the Slurm cluster (a login node), or install Slurm's client (Debian: apt-get install slurm-client)"
# Stale shard files of an earlier run would be merged as if this run wrote them.
rm -f "$CAKE_OUT_DIR"/shard-*-of-"$CAKE_SHARDS".json "$CAKE_OUT_DIR"/merged.json

export CAKE CAKE_ROOT CAKE_SHARDS CAKE_OUT_DIR CAKE_TIERS CAKE_GATE_ARGS="${CAKE_GATE_ARGS:-}" CAKE_BASELINE="${CAKE_BASELINE:-}"
# shellcheck disable=SC2206
sbatch_args=(${CAKE_SBATCH_ARGS:-})
array=$(sbatch --parsable "${sbatch_args[@]}" --export=ALL --chdir="$CAKE_ROOT" --array="1-$CAKE_SHARDS" \
  --output="$CAKE_OUT_DIR/slurm-%A_%a.out" "$here/corpus-gate.sbatch") \
  || die "sbatch refused the array job (see its message above): check that this host reaches the cluster (\`sinfo\`, SLURM_CONF) and CAKE_SBATCH_ARGS"
array=${array%%;*} # "--parsable" prints "jobid[;cluster]"
echo "array job $array: $CAKE_SHARDS shards of ${CAKE_TIERS} ${CAKE_GATE_ARGS:-} -> $CAKE_OUT_DIR/shard-I-of-$CAKE_SHARDS.json"

# --kill-on-invalid-dep: if a shard fails, the merge is cancelled instead of pending forever.
wait_args=()
[ "${CAKE_SLURM_WAIT:-0}" = 1 ] && wait_args=(--wait)
merge_rc=0
merge=$(sbatch --parsable "${sbatch_args[@]}" "${wait_args[@]}" --export=ALL --chdir="$CAKE_ROOT" \
  --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$CAKE_OUT_DIR/slurm-%j-merge.out" "$here/corpus-merge.sbatch") || merge_rc=$?
merge=${merge%%;*}
if [ "${CAKE_SLURM_WAIT:-0}" != 1 ]; then
  [ "$merge_rc" = 0 ] || die "sbatch refused the merge job (see above); the array job $array still runs: cancel it with \`scancel $array\`"
  echo "merge job $merge: after the array succeeds -> $CAKE_OUT_DIR/merged.json (and merged.md)"
  exit 0
fi
echo "merge job $merge finished with exit status $merge_rc -> $CAKE_OUT_DIR/merged.json"
case "$merge_rc" in
  0 | 1) exit "$merge_rc" ;;
  *) die "the merge job did not finish cleanly (exit $merge_rc): see $CAKE_OUT_DIR/slurm-*-merge.out and the shards' slurm-${array}_*.out" ;;
esac
