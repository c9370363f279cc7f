#!/usr/bin/env bash
# Installs the CUDA compile toolchain (nvcc, ptxas, NVRTC, CUDA headers) from PyPI wheels into a
# project-local prefix, .toolchain/cuda, and writes .toolchain/cuda/env.sh for the other scripts.
# No GPU and no system CUDA are needed. Nothing but the pinned PyPI wheels is downloaded.
#
#   bash scripts/setup-cuda-toolchain.sh            # install if needed (fast and offline once done)
#   bash scripts/setup-cuda-toolchain.sh --verify   # ... then smoke-test nvcc, ptxas and NVRTC
#   . .toolchain/cuda/env.sh                        # use it from a shell
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/setup-cuda-toolchain.sh [--verify] [--force] [--quiet]

Installs nvcc, ptxas, NVRTC and the CUDA headers from pinned PyPI wheels into .toolchain/cuda
and writes .toolchain/cuda/env.sh, which exports:
  CAKE_CUDA_HOME     directory holding bin/ptxas, bin/nvcc and include/
  CAKE_NVRTC_LIB     full path of libnvrtc.so.<major>
  CAKE_CUDA_LIB_DIR  directory of libnvrtc, libnvrtc-builtins, libcudart
  CAKE_CUDA_VERSION  the pinned CUDA release
and puts $CAKE_CUDA_HOME/bin on PATH and $CAKE_CUDA_LIB_DIR on LD_LIBRARY_PATH (NVRTC dlopens
libnvrtc-builtins by name at compile time).

  --verify  after installing, compile a wgmma + mbarrier kernel with nvcc for sm_90a (with a
            ptxas resource report), assemble a PTX stub with ptxas for every Cake target, and
            compile a kernel to a cubin through libnvrtc
  --force   reinstall even if the stamp says the pinned versions are installed
  --quiet   print only errors

Environment: CAKE_TOOLCHAIN_PREFIX (default <repo>/.toolchain/cuda), CAKE_PYTHON (default
python3). pip's own configuration (PIP_INDEX_URL, PIP_FIND_LINKS, proxies) is respected.
EOF
}

VERIFY=0 FORCE=0 QUIET=0
for arg in "$@"; do
  case "$arg" in
    --verify) VERIFY=1 ;;
    --force) FORCE=1 ;;
    --quiet | -q) QUIET=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "setup-cuda-toolchain: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

# One CUDA release for every package. 13.0 is the CUDA level of the H200 machine's driver and of
# its /usr/local/cuda NVRTC, so what compiles here compiles there, and PTX/cubins made here load on
# that driver. ptxas 13.0 assembles for every Cake target (sm_80 sm_89 sm_90a sm_100a sm_103a
# sm_120a sm_121a); `--verify` checks that. To move to another 13.x release, change all pins
# together (see `pip index versions nvidia-cuda-nvcc`) and CUDA_RELEASE.
CUDA_RELEASE=13.0
PINS=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
  nvidia-cuda-nvrtc==13.0.88
)
# Bump when the prefix layout or env.sh changes, so existing installs are redone.
LAYOUT=1
CAKE_TARGETS=(sm_80 sm_89 sm_90a sm_100a sm_103a sm_120a sm_121a)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${CAKE_TOOLCHAIN_PREFIX:-$ROOT/.toolchain/cuda}
PKGS=$PREFIX/pkgs
STAMP=$PREFIX/.stamp
ENV_SH=$PREFIX/env.sh
PY=${CAKE_PYTHON:-python3}

say() { [ "$QUIET" = 1 ] || echo "setup-cuda-toolchain: $*"; }
die() {
  echo "setup-cuda-toolchain: error: $1" >&2
  shift
  for line in "$@"; do echo "  $line" >&2; done
  exit 1
}

stamp_text() {
  printf 'layout=%s\ncuda=%s\n' "$LAYOUT" "$CUDA_RELEASE"
  printf '%s\n' "${PINS[@]}"
}

# The wheels put everything under one directory (nvidia/cu13/ for CUDA 13: bin/ptxas, bin/nvcc,
# nvvm/bin/cicc, include/, lib/libnvrtc.so.13). Find it from ptxas rather than hard-coding it.
find_cuda_home() {
  local ptxas
  ptxas=$(find "$PKGS" -maxdepth 4 -path '*/bin/ptxas' -type f 2>/dev/null | sort | head -n 1 || true)
  [ -n "$ptxas" ] || return 1
  dirname "$(dirname "$ptxas")"
}

find_nvrtc_lib() {
  # libnvrtc.so.13, not libnvrtc.alt.so.13 nor libnvrtc-builtins.so.13.0
  local dir
  for dir in "$1/lib" "$1/lib64"; do
    [ -d "$dir" ] || continue
    find "$dir" -maxdepth 1 -name 'libnvrtc.so.*' | sort | head -n 1
  done | head -n 1 || true
}

installed_ok() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_text)" ] || return 1
  local home
  home=$(find_cuda_home) || return 1
  [ -x "$home/bin/ptxas" ] && [ -x "$home/bin/nvcc" ] && [ -f "$home/include/cuda_runtime.h" ] &&
    [ -n "$(find_nvrtc_lib "$home")" ]
}

pip_failure_help() {
  local log=$1
  echo "---- last lines of $log ----" >&2
  tail -n 25 "$log" >&2 || true
  echo "----" >&2
  if grep -qiE 'NewConnectionError|Max retries|Temporary failure in name resolution|Name or service not known|Network is unreachable|ConnectTimeout|ReadTimeout|SSLError|ProxyError|HTTP error|Connection refused' "$log"; then
    die "pip could not reach the package index." \
      "The CUDA toolchain comes from PyPI wheels (pypi.org, files.pythonhosted.org)." \
      "Check network access to PyPI, or point pip at a PyPI mirror (PIP_INDEX_URL), or" \
      "download the wheels elsewhere with: $PY -m pip download --no-deps --only-binary=:all: ${PINS[*]}" \
      "and set PIP_FIND_LINKS=<that directory> (add PIP_NO_INDEX=1 to stay offline)."
  elif grep -qiE 'No matching distribution|Could not find a version' "$log"; then
    die "pip found no wheel for one of the pinned packages on this platform ($(uname -sm), $("$PY" --version 2>&1))." \
      "The NVIDIA wheels exist for Linux x86_64 and aarch64. 'from versions: none' usually means the" \
      "index was unreachable or is a mirror without them: check access to pypi.org, or PIP_INDEX_URL." \
      "Pinned: ${PINS[*]}"
  elif grep -qiE 'No space left on device' "$log"; then
    die "out of disk space; the toolchain needs about 700 MB (500 MB installed + pip cache)."
  else
    die "pip install failed (see the log above and $log)." \
      "Retry with: bash scripts/setup-cuda-toolchain.sh --force"
  fi
}

install_toolchain() {
  case "$(uname -s)/$(uname -m)" in
    Linux/x86_64 | Linux/aarch64) ;;
    *) die "the CUDA wheels exist only for Linux x86_64 and aarch64; this is $(uname -sm)." ;;
  esac
  command -v "$PY" >/dev/null 2>&1 ||
    die "'$PY' not found; the toolchain is installed with pip." \
      "Install Python 3 with pip (Debian: apt-get install python3 python3-pip) or set CAKE_PYTHON."
  "$PY" -m pip --version >/dev/null 2>&1 ||
    die "'$PY -m pip' does not work; the toolchain is installed with pip." \
      "Install pip (Debian: apt-get install python3-pip, or $PY -m ensurepip) or set CAKE_PYTHON."

  say "installing CUDA $CUDA_RELEASE toolchain wheels into ${PKGS#"$ROOT"/} (about 200 MB download) ..."
  local tmp=$PREFIX/pkgs.partial log=$PREFIX/pip-install.log
  rm -rf "$tmp" "$STAMP"
  # --no-deps: the pins are the whole set (nvcc's wheel names nvvm/crt/runtime without versions).
  # --only-binary: wheels only, never a source build.
  if ! PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install --no-input --disable-pip-version-check \
    --no-deps --only-binary=:all: --target "$tmp" "${PINS[@]}" >"$log" 2>&1; then
    rm -rf "$tmp"
    pip_failure_help "$log"
  fi
  rm -rf "$PKGS"
  mv "$tmp" "$PKGS"
  find_cuda_home >/dev/null ||
    die "the wheels installed, but no bin/ptxas was found under $PKGS; the wheel layout may have changed."
  stamp_text >"$STAMP"
}

write_env() {
  local home=$1 nvrtc=$2 tmp=$ENV_SH.tmp
  {
    echo "# Generated by scripts/setup-cuda-toolchain.sh; do not edit. Use: . .toolchain/cuda/env.sh"
    printf 'export CAKE_CUDA_HOME=%q\n' "$home"
    printf 'export CAKE_NVRTC_LIB=%q\n' "$nvrtc"
    printf 'export CAKE_CUDA_LIB_DIR=%q\n' "$(dirname "$nvrtc")"
    printf 'export CAKE_CUDA_VERSION=%q\n' "$CUDA_RELEASE"
    cat <<'EOF'
case ":$PATH:" in *":$CAKE_CUDA_HOME/bin:"*) ;; *) export PATH="$CAKE_CUDA_HOME/bin:$PATH" ;; esac
case ":${LD_LIBRARY_PATH:-}:" in
  *":$CAKE_CUDA_LIB_DIR:"*) ;;
  *) export LD_LIBRARY_PATH="$CAKE_CUDA_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac
EOF
  } >"$tmp"
  mv "$tmp" "$ENV_SH"
}

# ---------------------------------------------------------------------------------------------
# --verify: smoke checks of the installed toolchain
# ---------------------------------------------------------------------------------------------
verify() {
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/cake-cuda-verify.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  # shellcheck disable=SC1090
  . "$ENV_SH"

  say "verify: $(ptxas --version | tail -n 2 | head -n 1)"
  say "verify: nvcc: $(nvcc --version | tail -n 2 | head -n 1)"

  # ptxas assembles for every Cake target.
  local t
  for t in "${CAKE_TARGETS[@]}"; do
    cat >"$work/stub.ptx" <<EOF
.version 8.8
.target $t
.address_size 64
.visible .entry cake_stub(.param .u64 out)
{
  .reg .u64 %rd<2>;
  .reg .f32 %f<1>;
  ld.param.u64 %rd0, [out];
  cvta.to.global.u64 %rd1, %rd0;
  mov.f32 %f0, 0f3F800000;
  st.global.f32 [%rd1], %f0;
  ret;
}
EOF
    ptxas -arch="$t" -o "$work/stub-$t.cubin" "$work/stub.ptx" >"$work/ptxas-$t.log" 2>&1 ||
      { cat "$work/ptxas-$t.log" >&2; die "ptxas cannot assemble for $t."; }
  done
  say "verify: ptxas assembles for ${CAKE_TARGETS[*]}"

  # nvcc: Hopper-only inline PTX (wgmma.fence, mbarrier.init) compiled to an sm_90a cubin.
  command -v "${CXX:-g++}" >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 ||
    die "nvcc needs a host C++ compiler and none was found." "Install one (Debian: apt-get install g++)."
  cat >"$work/smoke.cu" <<'EOF'
#include <cstdint>
extern "C" __global__ void cake_smoke(float* out) {
  __shared__ alignas(8) uint64_t bar;
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(addr), "r"(128) : "memory");
  }
  __syncthreads();
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  out[threadIdx.x] = 1.0f;
}
EOF
  nvcc -arch=sm_90a -cubin -Xptxas -v -o "$work/smoke.cubin" "$work/smoke.cu" >"$work/nvcc.log" 2>&1 ||
    { cat "$work/nvcc.log" >&2; die "nvcc failed to compile the sm_90a wgmma + mbarrier smoke kernel."; }
  grep -q 'ptxas info *: Used [0-9]* registers' "$work/nvcc.log" ||
    { cat "$work/nvcc.log" >&2; die "ptxas -v printed no resource report."; }
  [ -s "$work/smoke.cubin" ] || die "nvcc reported success but wrote no cubin."
  say "verify: nvcc -arch=sm_90a -cubin (wgmma.fence + mbarrier.init): $(grep -o 'Used .*' "$work/nvcc.log" | head -n 1)"

  # NVRTC: the library the compiler loads at run time, compiling to a cubin.
  "$PY" - "$CAKE_NVRTC_LIB" >"$work/nvrtc.log" 2>&1 <<'EOF' ||
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
src = rb'''
extern "C" __global__ void cake_smoke(float* out) {
  __shared__ alignas(8) unsigned long long bar;
  unsigned addr = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(addr), "r"(128) : "memory");
  __syncthreads();
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  out[threadIdx.x] = 1.0f;
}
'''
major, minor = ctypes.c_int(), ctypes.c_int()
lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
prog = ctypes.c_void_p()
if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"cake_smoke.cu", 0, None, None) != 0:
    sys.exit("nvrtcCreateProgram failed")
opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=sm_90a")
rc = lib.nvrtcCompileProgram(prog, 1, opts)
n = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value)
lib.nvrtcGetProgramLog(prog, log)
if rc != 0:
    sys.exit("nvrtcCompileProgram failed (%d):\n%s" % (rc, log.value.decode(errors="replace")))
size = ctypes.c_size_t()
if lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)) != 0 or size.value == 0:
    sys.exit("nvrtcGetCUBINSize gave no cubin")
print("NVRTC %d.%d compiled an sm_90a cubin of %d bytes" % (major.value, minor.value, size.value))
EOF
    { cat "$work/nvrtc.log" >&2; die "NVRTC ($CAKE_NVRTC_LIB) failed to compile the smoke kernel."; }
  say "verify: $(tail -n 1 "$work/nvrtc.log")"
  say "verify: OK"
}

# ---------------------------------------------------------------------------------------------
mkdir -p "$PREFIX"
# Serialize concurrent runs (two scripts starting at once on one checkout).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$PREFIX/.lock"
  flock 9
fi

if [ "$FORCE" = 0 ] && installed_ok; then
  say "CUDA $CUDA_RELEASE toolchain already installed (stamp matches), skipping pip"
else
  install_toolchain
fi

CUDA_HOME_DIR=$(find_cuda_home)
NVRTC_LIB=$(find_nvrtc_lib "$CUDA_HOME_DIR")
[ -n "$NVRTC_LIB" ] || die "no libnvrtc.so.* under $CUDA_HOME_DIR/lib; rerun with --force."
write_env "$CUDA_HOME_DIR" "$NVRTC_LIB"
say "ptxas: $CUDA_HOME_DIR/bin/ptxas"
say "nvrtc: $NVRTC_LIB"
say "env:   ${ENV_SH#"$ROOT"/} (source it to use the toolchain)"

if [ "$VERIFY" = 1 ]; then
  verify
fi
