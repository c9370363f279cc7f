#!/usr/bin/env bash
# Closes the loop between kernel evolution and compiler evolution (issue 14), in four phases that
# each read what the previous one wrote under $LOOP (default .cake/loop/<rule>):
#
#   ablate   cake-evolve-compiler ablate --rule $RULE -o $LOOP/base: a repository without the rule,
#            so its bug class reaches the lowering and the GPU.
#   search   cake-evolve-kernel run $CONTRACT --rules $LOOP/base/compiler/rules: failing candidates
#            (the class's lowering refusals and GPU failures) are routed to $LOOP/evidence. On the
#            H200 instead: RULES=$LOOP/base/compiler/rules DB=$LOOP/search.sqlite
#            bash scripts/device-kernel-evolution.sh $CONTRACT (carry the rules directory), then
#            unpack its evidence.tar.gz into $LOOP/evidence.
#   learn    propose from $LOOP/evidence in the base, with every gate (the generalization gate
#            included), and accept each proposal that passed them.
#   confirm  a second search with a new database under the base's rules as accepted: the class is
#            rejected by the gates, before the GPU; prints the rejections per code of both runs.
#
# Usage: RULE=V218 CONTRACT=kernel-evolution/contracts/gemm-bf16.toml \
#          bash scripts/kernel-evolution-loop.sh [ablate|search|learn|confirm|all]
# Environment: RULE (default V218), CONTRACT (default the bf16 GEMM contract), LOOP, WALL (seconds
# per search, default 150), EVALS (GPU evaluations per search, default 60), SEED (default 1),
# BIN (folder of cake-evolve-kernel and cake-evolve-compiler, default target/debug).
# Exit: 0 the phase(s) succeeded (for `confirm`: the accepted rule rejected the class), 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
RULE=${RULE:-V218}
CONTRACT=${CONTRACT:-kernel-evolution/contracts/gemm-bf16.toml}
LOOP=${LOOP:-.cake/loop/$RULE}
WALL=${WALL:-150}
EVALS=${EVALS:-60}
SEED=${SEED:-1}
BIN=${BIN:-target/debug}
KEVO=$ROOT/$BIN/cake-evolve-kernel
EVOLVE=$ROOT/$BIN/cake-evolve-compiler
mkdir -p "$LOOP"
LOOP=$(cd "$LOOP" && pwd)
CONTRACT=$ROOT/$CONTRACT

# The compile tier of the gates needs the CUDA toolchain (skipped, and said so, without it).
. "$ROOT/scripts/common.sh"
cake_use_toolchain >/dev/null 2>&1 || echo "note: no CUDA toolchain: the gates' compile tier is skipped"

for b in "$KEVO" "$EVOLVE"; do
  [ -x "$b" ] || { echo "error: $b is missing: cargo build -p cake -p cake-evolve -p cake-evolve-kernel"; exit 1; }
done
export CAKE_BIN=${CAKE_BIN:-$ROOT/$BIN/cake}

ablate() {
  [ -d "$LOOP/base" ] && { echo "ablate: $LOOP/base exists (kept)"; return 0; }
  "$EVOLVE" ablate --rule "$RULE" -o "$LOOP/base"
}

search() {
  "$KEVO" run "$CONTRACT" --db "$LOOP/search.sqlite" --seed "$SEED" --evidence "$LOOP/evidence" \
    --rules "$LOOP/base/compiler/rules" --wall-seconds "$WALL" --budget-evals "$EVALS" --message-format json > "$LOOP/search.json"
  local rc=$?
  # 3: the GPU stage was skipped (no GPU); the lowering's refusals were still routed.
  [ $rc -eq 0 ] || [ $rc -eq 3 ] || { echo "search: exit $rc"; return 1; }
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("search:", j["candidates"], "candidates,", j["gate_rejected"], "rejected by the gates", j["rejected_by"], "|", j["failed"], "failed on the GPU stage,", j["skipped"], "skipped")' "$LOOP/search.json"
}

learn() {
  (cd "$LOOP/base" && "$EVOLVE" mine --store "$LOOP/evidence" --top 8) || return 1
  (cd "$LOOP/base" && "$EVOLVE" propose --evidence "$LOOP/evidence" --no-progress) | tee "$LOOP/propose.txt"
  local ids
  ids=$(cd "$LOOP/base" && "$EVOLVE" list --status queued 2>/dev/null | awk '$1 ~ /^r-[0-9a-f]+$/ && $4 == "pass" { print $1 }')
  [ -n "$ids" ] || { echo "learn: no queued rule proposal passed its gates"; return 1; }
  for id in $ids; do
    (cd "$LOOP/base" && "$EVOLVE" show "$id" --no-diff | sed -n '1,/^gates/p')
    (cd "$LOOP/base" && "$EVOLVE" accept "$id") || return 1
  done
}

confirm() {
  rm -f "$LOOP/confirm.sqlite"*
  "$KEVO" run "$CONTRACT" --db "$LOOP/confirm.sqlite" --seed "$SEED" --evidence "$LOOP/evidence-confirm" \
    --rules "$LOOP/base/compiler/rules" --wall-seconds "$WALL" --budget-evals "$EVALS" --message-format json > "$LOOP/confirm.json"
  local rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 3 ] || { echo "confirm: exit $rc"; return 1; }
  python3 - "$LOOP/search.json" "$LOOP/confirm.json" "$LOOP/base/compiler/rules" <<'PY'
import json, pathlib, sys
first, second = (json.load(open(p)) for p in sys.argv[1:3])
learned = sorted(p.name.split("-")[0] for p in pathlib.Path(sys.argv[3]).rglob("V6*.toml"))
print("first run :", first["candidates"], "candidates; rejected by code", first["rejected_by"], "; failed after the gates", first["failed"])
print("second run:", second["candidates"], "candidates; rejected by code", second["rejected_by"], "; failed after the gates", second["failed"])
caught = sum(second["rejected_by"].get(c, 0) for c in learned)
print("accepted rule(s):", ", ".join(learned) or "none", "| candidates they rejected before the GPU:", caught)
sys.exit(0 if learned and caught > 0 else 1)
PY
}

case "${1:-all}" in
  ablate) ablate ;;
  search) search ;;
  learn) learn ;;
  confirm) confirm ;;
  all) ablate && search && learn && confirm ;;
  *) echo "usage: bash scripts/kernel-evolution-loop.sh [ablate|search|learn|confirm|all]"; exit 2 ;;
esac
