#!/usr/bin/env bash
# Makes the bundled evidence set of the compiler-evolution engine by running REAL broken programs
# through the harness: every evolution/evidence/candidates/*.cake (into the store `bundle/`) and
# every evolution/evidence/heldout/*.cake (into `heldout-bundle/`, kept apart so mining never sees
# the held-out programs) goes through
#   1. `cake run --unsafe-skip-verify` at the workload's one small shape: the verifier is bypassed,
#      so the program is lowered and compiled (NVRTC + ptxas: a lowering refusal, a compile error,
#      the ptxas report are the compile tier) and, where a GPU is present, run against the oracle
#      in a child process with a timeout (a fault, a wrong answer or a hang is the GPU tier);
#   2. `cake-evolve-compiler import --kind run` of each new run record with `--program`, which
#      stores the program's canonical source in the store (mining re-verifies and re-lowers it);
#   3. where compute-sanitizer exists and the run faulted or answered wrongly (not for hangs):
#      the same run under `compute-sanitizer --tool memcheck`, its output imported with
#      `--kind sanitizer`;
# and ends with `cake-evolve-compiler mine` over each store.
#
# Works the same on the CPU machine (no GPU: runs are recorded as `skipped`, build failures and
# ptxas reports are the evidence) and on the H200 (the lead runs it there in one device call):
#
#   here:   cargo build --release -p cake -p cake-evolve
#           strip -o target/release/cake-device target/release/cake
#           strip -o target/release/cake-evolve-device target/release/cake-evolve-compiler
#   device: run(command="OUT=$OUT bash scripts/make-evidence.sh",
#               carry=["target/release/cake-device", "target/release/cake-evolve-device"], timeout_s=600)
#   then:   tar xzf <files_at>/evidence-bundle.tar.gz -C evolution/evidence/ bundle heldout-bundle
#           (merges into bundle/ and heldout-bundle/; sanitizer-logs/ in the tarball holds the
#           sanitizer's raw output, already imported into the stores' files/)
#
# Records are content-addressed: unpacking over the committed compile-tier stores only adds files.
#
# With OUT set, the stores are written under $TMPDIR and OUT receives (≤ 8 files):
# evidence-bundle.tar.gz (bundle/ and heldout-bundle/), make-evidence.log, mine.txt,
# mine-heldout.txt. Without OUT the stores are written in place: evolution/evidence/bundle and
# evolution/evidence/heldout-bundle.
#
# Environment: CAKE_BIN, CAKE_EVOLVE_BIN (default: the -device binaries, else target/release, else
# target/debug), TIMEOUT (seconds per run, default 10), SANITIZER (auto|0, default auto),
# HELDOUT (1|0, default 1), ONLY (a glob on file names, e.g. 'box_*'), DEADLINE (seconds, default
# 540), CAKE_CUDA_DIR (default /usr/local/cuda), STORE / HELDOUT_STORE (override the stores).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
# Relative, so records name `evolution/evidence/candidates/NAME.cake` whatever the checkout's path.
EV=evolution/evidence
T0=$SECONDS
DEADLINE=${DEADLINE:-540}
TIMEOUT=${TIMEOUT:-10}
SANITIZER=${SANITIZER:-auto}
HELDOUT=${HELDOUT:-1}
ONLY=${ONLY:-*}
CUDA_DIR=${CAKE_CUDA_DIR:-/usr/local/cuda}
OUT=${OUT:-}

pick_bin() { # ENV_VALUE NAME...: the first executable
  local v=$1 n
  shift
  [ -n "$v" ] && { echo "$v"; return; }
  for n in "$@"; do
    [ -x "$ROOT/target/$n" ] && { echo "$ROOT/target/$n"; return; }
  done
  echo ""
}
CAKE=$(pick_bin "${CAKE_BIN:-}" release/cake-device release/cake debug/cake)
EVOLVE=$(pick_bin "${CAKE_EVOLVE_BIN:-}" release/cake-evolve-device release/cake-evolve-compiler debug/cake-evolve-compiler)

if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
  WORK=${TMPDIR:-/tmp}/cake-make-evidence
  rm -rf "$WORK"
  mkdir -p "$WORK"
  STORE=${STORE:-$WORK/bundle}
  HELDOUT_STORE=${HELDOUT_STORE:-$WORK/heldout-bundle}
  LOG=$OUT/make-evidence.log
  exec > >(tee "$LOG") 2>&1
else
  WORK=$(mktemp -d)
  STORE=${STORE:-$EV/bundle}
  HELDOUT_STORE=${HELDOUT_STORE:-$EV/heldout-bundle}
fi
SCRATCH=$WORK/scratch-evidence   # runs under the sanitizer: not evidence themselves
LOGS=$WORK/sanitizer-logs         # the sanitizer's output, verbatim (also stored in each store's files/)
mkdir -p "$STORE" "$HELDOUT_STORE" "$SCRATCH" "$LOGS"

left() { echo $((DEADLINE - (SECONDS - T0))); }

# ---- environment -------------------------------------------------------------------------------
if [ -z "$CAKE" ]; then
  echo "error: need the cake binary (cargo build --release -p cake), or CAKE_BIN"
  exit 2
fi
if [ -z "$EVOLVE" ] || ! "$EVOLVE" --version >/dev/null 2>&1; then
  # Without it: programs are stored by hash here (the candidates are in canonical form, a test
  # checks it), sanitizer logs are kept in the tarball for `import --kind sanitizer` later.
  echo "warning: no working cake-evolve-compiler ($EVOLVE): storing programs directly, keeping sanitizer logs unimported"
  EVOLVE=
fi
if [ -z "${CAKE_NVRTC_LIB:-}" ]; then
  if [ -f "$ROOT/.toolchain/cuda/env.sh" ] && [ "${CAKE_SKIP_TOOLCHAIN:-0}" != 1 ]; then
    # shellcheck disable=SC1091
    . "$ROOT/.toolchain/cuda/env.sh"
  else
    for d in "$CUDA_DIR/lib64" "$CUDA_DIR/lib" "$CUDA_DIR/targets/x86_64-linux/lib"; do
      f=$(ls "$d"/libnvrtc.so.1[0-9] 2>/dev/null | sort | head -n 1)
      if [ -n "$f" ]; then
        export CAKE_NVRTC_LIB=$f
        export LD_LIBRARY_PATH="$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        break
      fi
    done
  fi
fi
for d in "$CUDA_DIR/lib64" "$CUDA_DIR/targets/x86_64-linux/lib"; do
  if ls "$d"/libcublas.so.1[0-9] >/dev/null 2>&1; then
    case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
    break
  fi
done
SAN=
if [ "$SANITIZER" != 0 ]; then
  SAN=$(command -v compute-sanitizer || true)
  [ -z "$SAN" ] && [ -x "$CUDA_DIR/bin/compute-sanitizer" ] && SAN=$CUDA_DIR/bin/compute-sanitizer
fi
echo "cake:      $CAKE ($("$CAKE" --version 2>/dev/null))"
echo "evolve:    $EVOLVE"
echo "NVRTC:     ${CAKE_NVRTC_LIB:-(found by cake)}"
echo "sanitizer: ${SAN:-none}"
echo "GPU:       $(nvidia-smi -L 2>/dev/null | head -n 1 || true)"
echo "stores:    $STORE, $HELDOUT_STORE"

# ---- one program ---------------------------------------------------------------------------------
workload_of() { # FILE → "WORKLOAD SHAPE"
  case "$(basename "$1")" in
    *_kmeans*) echo "$EV/workloads/kmeans.workload.toml B=2,N=256,K=384,D=128" ;;
    *_attn_*) echo "$EV/workloads/attn.workload.toml BH=2,S=256" ;;
    stride_*) echo "$EV/workloads/gemm_stride.workload.toml M=256,N=512,K=540" ;;
    *) echo "$EV/workloads/gemm.workload.toml M=256,N=512,K=192" ;;
  esac
}

SUMMARY=()
run_one() { # STORE FILE
  local store=$1 p=$2 name wl shape before after r out class rc limit
  name=$(basename "$p" .cake)
  read -r wl shape <<<"$(workload_of "$p")"
  if [ "$(left)" -lt $((TIMEOUT + 20)) ]; then
    echo "SKIPPED $name: out of time"
    SUMMARY+=("$(printf '%-32s %s' "$name" "skipped (out of time)")")
    return
  fi
  echo
  echo "==> $name  [$((SECONDS - T0))s elapsed]"
  before=$(ls "$store/runs" 2>/dev/null | sort)
  limit=$((TIMEOUT * 2 + 90))
  timeout --kill-after=5 "$limit" "$CAKE" run "$p" --unsafe-skip-verify --dist normal --workload "$wl" --shape "$shape" \
    --timeout "$TIMEOUT" --max-timeouts 1 --repeats 2 --warmup 1 --evidence "$store" 2>&1 |
    grep -E '^(error|warning|note)\[|^error:|^[A-Z][A-Za-z0-9_]*=|run\(s\)' | cut -c1-220
  rc=${PIPESTATUS[0]}
  [ "$rc" = 124 ] && echo "error: cake run exceeded ${limit}s and was stopped"
  after=$(ls "$store/runs" 2>/dev/null | sort)
  class=
  for r in $(comm -13 <(echo "$before") <(echo "$after")); do
    if [ -n "$EVOLVE" ]; then
      out=$("$EVOLVE" import --kind run "$store/runs/$r" --program "$p" --store "$store" --format json)
      class=$(echo "$out" | sed -n 's/.*"class":"\([^"]*\)".*/\1/p' | head -n 1)
    else
      local sha
      sha=$(sha256sum "$p" | cut -c1-64)
      mkdir -p "$store/programs"
      [ -f "$store/programs/$sha.cake" ] || cp "$p" "$store/programs/$sha.cake"
      class=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print((r.get("error") or {}).get("class") or r["verdict"])' "$store/runs/$r")
    fi
    echo "    record ${r:0:12}: $class"
  done
  SUMMARY+=("$(printf '%-32s %s' "$name" "${class:-no record}")")
  case "$class" in
    ""|pass|skipped|timeout|build_*|no_gpu|arch|workload|shape|io|internal|driver_library) return ;;
  esac
  if [ -n "$SAN" ] && [ "$(left)" -gt 150 ]; then
    local log=$LOGS/$(basename "$store")/$name.memcheck.log
    mkdir -p "$(dirname "$log")"
    echo "    compute-sanitizer memcheck ..."
    timeout --kill-after=5 120 "$SAN" --tool memcheck --target-processes all --print-limit 20 \
      "$CAKE" run "$p" --unsafe-skip-verify --dist normal --workload "$wl" --shape "$shape" --timeout 60 \
      --repeats 1 --warmup 0 --no-cublas-check --evidence "$SCRATCH" >"$log" 2>&1
    grep -c '^========= ' "$log" | sed 's/^/    sanitizer lines: /'
    if [ -n "$EVOLVE" ]; then
      "$EVOLVE" import --kind sanitizer "$log" --program "$p" --shape "$shape" --store "$store" | sed 's/^/    /'
    else
      echo "    kept $log: import it with: cake-evolve-compiler import --kind sanitizer $(basename "$log") --program $p --shape $shape --store $(basename "$store")"
    fi
  fi
}

# ---- all programs --------------------------------------------------------------------------------
shopt -s nullglob
for p in "$EV"/candidates/$ONLY.cake; do [ -f "$p" ] && run_one "$STORE" "$p"; done
if [ "$HELDOUT" = 1 ]; then
  for p in "$EV"/heldout/$ONLY.cake; do [ -f "$p" ] && run_one "$HELDOUT_STORE" "$p"; done
fi

echo
echo "---- last record per program ----"
printf '%s\n' "${SUMMARY[@]}"
echo
if [ -n "$EVOLVE" ]; then
  echo "---- mine: $STORE ----"
  "$EVOLVE" mine --store "$STORE" | tee "$WORK/mine.txt"
  if [ "$HELDOUT" = 1 ]; then
    echo
    echo "---- mine: $HELDOUT_STORE ----"
    "$EVOLVE" mine --store "$HELDOUT_STORE" | tee "$WORK/mine-heldout.txt"
  fi
fi

if [ -n "$OUT" ]; then
  cp "$WORK/mine.txt" "$OUT/mine.txt" 2>/dev/null
  cp "$WORK/mine-heldout.txt" "$OUT/mine-heldout.txt" 2>/dev/null
  tar czf "$OUT/evidence-bundle.tar.gz" -C "$(dirname "$STORE")" "$(basename "$STORE")" \
    -C "$(dirname "$HELDOUT_STORE")" "$(basename "$HELDOUT_STORE")" -C "$WORK" "$(basename "$LOGS")"
  echo "wrote $OUT/evidence-bundle.tar.gz ($(du -h "$OUT/evidence-bundle.tar.gz" | cut -f1))"
else
  rm -rf "$WORK"
fi
echo "done in $((SECONDS - T0))s"
