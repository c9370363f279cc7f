#!/usr/bin/env bash
# Runs the kernel-evolution loop (cake-evolve-kernel) on the H200 machine, resumable across device
# calls: the program database travels in with `carry` and comes back in $OUT, and each call
# continues the search where the last one stopped (`resume`), so a 20-minute budget can be spread
# over several 10-minute calls. The device machine has no cargo: it uses release binaries built
# here and stripped (the working tree and carried files share 64 MiB):
#
#   here:   cargo build --release -p cake -p cake-evolve-kernel
#           strip -o target/release/cake-device target/release/cake
#           strip -o target/release/cake-evolve-kernel-device target/release/cake-evolve-kernel
#   device: run(command="CAKE_GIT_COMMIT=<hash of HEAD> DB=.cake/kernel-evolution/kmeans-assign.sqlite
#                        bash scripts/device-kernel-evolution.sh kernel-evolution/contracts/kmeans-assign.toml",
#               carry=["target/release/cake-device", "target/release/cake-evolve-kernel-device",
#                      ".cake/kernel-evolution/kmeans-assign.sqlite"], timeout_s=600)
#   then:   copy $OUT's kmeans-assign.sqlite back to .cake/kernel-evolution/ before the next call
#           (the first call has no database: carry reports it as not carried, and `run` makes it).
#
# Writes to $OUT: the database (<name>.sqlite, checkpointed), device-kernel-evolution.log,
# report.txt, report.json, best.cake, evidence.tar.gz (the routed evidence: runs/, failures/,
# programs/, for `cake-evolve-compiler import`/`mine`).
#
# The Flash-KMeans contract's peer, flashlib 0.4.0's Triton assign (benchmarks/flashlib_kmeans_peer.py),
# needs the flashlib wheel on the device (no network there): carry it and set FLASHLIB_WHEEL to its
# path; it is installed with `pip install --no-deps` before the loop. Without it the peer is
# recorded as skipped (exit 3), never as a time.
#
# Environment: DB (required: the database path, relative to the repository), RULES (a rules
# directory to gate and run with, e.g. an ablated base's, carried in; default: the checkout's), SEED (default 1, used
# by the first call only), WALL (seconds this call may search, default 420: the device call allows
# 600 and one evaluation may still be finishing), CAKE_GIT_COMMIT, OUT (default
# /tmp/device-kernel-evolution-out), CAKE_CUDA_DIR (default /usr/local/cuda).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
CONTRACT=${1:?usage: DB=PATH bash scripts/device-kernel-evolution.sh CONTRACT.toml}
DB=${DB:?set DB to the database path (carried in, returned in \$OUT)}
SEED=${SEED:-1}
WALL=${WALL:-420}
OUT=${OUT:-${TMPDIR:-/tmp}/device-kernel-evolution-out}
mkdir -p "$OUT"
LOG=$OUT/device-kernel-evolution.log
EVIDENCE=${TMPDIR:-/tmp}/kernel-evolution-evidence
mkdir -p "$EVIDENCE" "$(dirname "$DB")"
CUDA_DIR=${CAKE_CUDA_DIR:-/usr/local/cuda}

KEVO=$ROOT/target/release/cake-evolve-kernel-device
[ -x "$KEVO" ] || KEVO=$ROOT/target/release/cake-evolve-kernel
export CAKE_BIN=${CAKE_BIN:-$ROOT/target/release/cake-device}
[ -x "$CAKE_BIN" ] || CAKE_BIN=$ROOT/target/release/cake

find_lib() { # NAME-GLOB: first match in the CUDA toolkit, then in Python's nvidia wheels
  local f
  for d in "$CUDA_DIR/lib64" "$CUDA_DIR/lib" "$CUDA_DIR/targets/x86_64-linux/lib"; do
    f=$(ls "$d"/$1 2>/dev/null | sort | head -n 1)
    [ -n "$f" ] && { echo "$f"; return 0; }
  done
  python3 - "$1" 2>/dev/null <<'PY'
import glob, os, site, sys
for r in site.getsitepackages() + [site.getusersitepackages()]:
    for hit in sorted(glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1]), recursive=True)):
        print(hit); raise SystemExit
raise SystemExit(1)
PY
}

{
  echo "contract: $CONTRACT  db: $DB  seed: $SEED  wall: ${WALL}s"
  [ -x "$KEVO" ] || { echo "error: no cake-evolve-kernel binary (see the header for the build)"; exit 1; }
  [ -x "$CAKE_BIN" ] || { echo "error: no cake binary at $CAKE_BIN"; exit 1; }
  nvidia-smi -L || echo "warning: nvidia-smi failed"
  NVRTC=$(find_lib 'libnvrtc.so.1[0-9]') || NVRTC=$(find_lib 'libnvrtc.so*') || NVRTC=
  if [ -n "$NVRTC" ]; then
    export CAKE_NVRTC_LIB=$NVRTC
    export LD_LIBRARY_PATH="$(dirname "$NVRTC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "warning: libnvrtc not found: every evaluation will be skipped (build_N001)"
  fi
  CUBLAS=$(find_lib 'libcublas.so.1[0-9]') || CUBLAS=
  [ -n "$CUBLAS" ] && export LD_LIBRARY_PATH="$(dirname "$CUBLAS"):$LD_LIBRARY_PATH"
  if [ -n "${FLASHLIB_WHEEL:-}" ]; then
    python3 -m pip install --no-deps --quiet "$FLASHLIB_WHEEL" && echo "flashlib: installed $FLASHLIB_WHEEL" || echo "warning: flashlib wheel did not install: its peer will be skipped"
  fi
  RULES_ARGS=()
  [ -n "${RULES:-}" ] && RULES_ARGS=(--rules "$RULES")
  if [ -f "$DB" ]; then
    "$KEVO" resume "$CONTRACT" --db "$DB" --evidence "$EVIDENCE" --wall-seconds "$WALL" "${RULES_ARGS[@]}"
  else
    "$KEVO" run "$CONTRACT" --db "$DB" --seed "$SEED" --evidence "$EVIDENCE" --wall-seconds "$WALL" "${RULES_ARGS[@]}"
  fi
  echo "loop exit: $?"
  "$KEVO" report --db "$DB" | tee "$OUT/report.txt"
  "$KEVO" report --db "$DB" --format json > "$OUT/report.json"
  "$KEVO" best --db "$DB" > "$OUT/best.cake"
  "$KEVO" status --db "$DB"
} > "$LOG" 2>&1
tail -n 60 "$LOG"
# The loop closes its connection on exit, which checkpoints the WAL into the database file; a
# leftover -wal (a killed run) travels with it so nothing committed is lost.
cp "$DB" "$OUT/"
for f in "$DB-wal" "$DB-shm"; do [ -f "$f" ] && cp "$f" "$OUT/"; done
tar -czf "$OUT/evidence.tar.gz" -C "$EVIDENCE" . 2>/dev/null || true
