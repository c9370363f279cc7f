#!/usr/bin/env bash
# Drives `cake mcp` on the H200 machine the way an agent would, over stdio: initialize, check,
# cost, then `run` (two GEMM shapes, an inline softmax program with its workload) and `bench`
# (GEMM at 4096³ against cuBLAS), and fails unless every run passes. The CPU half of the same
# session is compiler/tests/mcp.rs; this is its GPU half, for a machine without cargo:
#
#   here:   cargo build --release -p cake && strip -o target/release/cake-device target/release/cake
#   device: run(command="bash scripts/device-mcp-check.sh", carry=["target/release/cake-device"])
#
# Exit: 0 every run passed; 1 a call failed or a run did not pass; 3 runs were skipped (no GPU, or
# no NVRTC), the reason printed.
# Environment: CAKE_BIN (default target/release/cake-device, else target/release/cake),
# CAKE_CUDA_DIR (default /usr/local/cuda; where NVRTC and cuBLAS are looked for).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
BIN=${CAKE_BIN:-}
if [ -z "$BIN" ]; then
  if [ -x target/release/cake-device ]; then BIN=target/release/cake-device; else BIN=target/release/cake; fi
fi
[ -x "$BIN" ] || { echo "device-mcp-check: no cake binary at $BIN (build one, see the top of this script)" >&2; exit 1; }
# NVRTC and cuBLAS from the CUDA toolkit, as scripts/device-check.sh finds them (unless set).
CUDA_DIR=${CAKE_CUDA_DIR:-/usr/local/cuda}
for d in "$CUDA_DIR/lib64" "$CUDA_DIR/lib" "$CUDA_DIR/targets/x86_64-linux/lib"; do
  nvrtc=$(ls "$d"/libnvrtc.so.1[0-9] 2>/dev/null | sort | head -n 1)
  if [ -z "${CAKE_NVRTC_LIB:-}" ] && [ -n "$nvrtc" ]; then
    export CAKE_NVRTC_LIB=$nvrtc
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
echo "NVRTC: ${CAKE_NVRTC_LIB:-not found under $CUDA_DIR (runs will be skipped: no CUDA toolchain)}"
EVIDENCE=$(mktemp -d "$ROOT/target/mcp-evidence.XXXXXX" 2>/dev/null || { mkdir -p "$ROOT/target" && mktemp -d "$ROOT/target/mcp-evidence.XXXXXX"; })

exec python3 - "$BIN" "${EVIDENCE#"$ROOT"/}" <<'EOF'
import json, subprocess, sys, time

binary, evidence = sys.argv[1], sys.argv[2]
server = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
next_id = 0

def send(message):
    server.stdin.write(json.dumps(message) + "\n")
    server.stdin.flush()

def request(method, params):
    global next_id
    next_id += 1
    send({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
    while True:
        line = server.stdout.readline()
        if not line:
            sys.exit("device-mcp-check: `cake mcp` closed its output")
        answer = json.loads(line)
        if answer.get("id") == next_id:
            return answer

def call(tool, arguments):
    start = time.time()
    answer = request("tools/call", {"name": tool, "arguments": arguments})
    if "error" in answer:
        sys.exit(f"device-mcp-check: {tool}: JSON-RPC error {answer['error']}")
    result = answer["result"]
    value = result["structuredContent"]
    print(f"==> {tool} ({time.time() - start:.1f} s): isError={result['isError']} status={value.get('status')}"
          f" verdicts={value.get('verdicts')} skipped={value.get('skipped')}")
    for record in value.get("records", []):
        times = record.get("times_ms") or {}
        baseline = record.get("baseline") or {}
        print(f"    {record['verdict']:8} {record['shape']} median {times.get('median')} ms"
              f" ratio to baseline {baseline.get('speed_ratio')} on {(record.get('gpu') or {}).get('name')}")
    return result, value

init = request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "device-mcp-check", "version": "0"}})
print("server:", init["result"]["serverInfo"])
send({"jsonrpc": "2.0", "method": "notifications/initialized"})

failures = []
_, checked = call("check", {"path": "examples/gemm_bf16_ws.cake"})
if checked["status"] != "clean":
    failures.append("check: the GEMM example is not clean")
_, cost = call("cost", {"path": "examples/gemm_bf16_ws.cake", "shape": "M=4096,N=4096,K=4096"})
print(f"    predicted {cost.get('predicted_ms')} ms, {cost.get('bottleneck')}")

softmax = open("examples/softmax_bf16.cake").read()
softmax_workload = open("examples/softmax_bf16.workload.toml").read()
runs = [
    ("run", {"path": "examples/gemm_bf16_ws.cake", "shapes": ["M=128,N=256,K=64", "M=1024,N=2048,K=512"],
             "dists": ["normal"], "evidence": evidence, "time_limit_s": 300}),
    ("run", {"program": softmax, "workload": softmax_workload, "shapes": ["R=1024"], "evidence": evidence,
             "time_limit_s": 300}),
    ("bench", {"path": "examples/gemm_bf16_ws.cake", "shapes": ["M=4096,N=4096,K=4096"], "baseline": "cublas",
               "evidence": evidence, "time_limit_s": 300}),
]
statuses, skipped = [], []
for tool, arguments in runs:
    result, value = call(tool, arguments)
    statuses.append(value.get("status"))
    if value.get("status") == "skipped":
        skipped.append(value)
    if result["isError"] or value.get("status") not in ("passed", "skipped"):
        failures.append(f"{tool}: {value.get('status')}: {value.get('error') or value.get('log', '')[-2000:]}")
server.stdin.close()
server.wait(timeout=60)
if failures:
    print("device-mcp-check: FAILED\n" + "\n".join(failures))
    sys.exit(1)
if "skipped" in statuses:
    reasons = sorted({value.get("skipped") for value in skipped})
    print(f"device-mcp-check: skipped ({', '.join(map(str, reasons))})")
    sys.exit(3)
print(f"device-mcp-check: ok, every run passed; records in {evidence}/runs")
EOF
