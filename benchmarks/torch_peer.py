#!/usr/bin/env python3
"""Time a torch operation as the same-machine peer of a Cake kernel (benchmarks/RESULTS.md).

    python3 benchmarks/torch_peer.py softmax --rows 65536 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py rmsnorm|layernorm|rowsum ...

Prints one JSON line: op, shape, dtype, median/min milliseconds over --repeats samples, each timed
with CUDA events after an L2 flush (a 256 MB write), the same method `cake bench` uses.
Exit 3 without a CUDA device or torch (nothing to measure here).
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import time_ms  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("op", choices=["softmax", "rmsnorm", "layernorm", "rowsum"])
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--eps", type=float, default=1e-5)
    a = p.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_peer: torch is not installed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_peer: no CUDA device", file=sys.stderr)
        return 3
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(a.rows, a.cols, device=dev, dtype=torch.float32, generator=g).to(dt)
    w = torch.randn(a.cols, device=dev, dtype=torch.float32, generator=g)
    b = torch.randn(a.cols, device=dev, dtype=torch.float32, generator=g)
    F = torch.nn.functional
    if a.op == "softmax":
        run = lambda: torch.softmax(x, dim=-1)
    elif a.op == "rmsnorm":
        # torch wants the weight in the input's dtype (the Cake kernel reads an f32 weight: 2
        # more bytes per column, negligible beside the rows).
        wd = w.to(dt)
        run = lambda: F.rms_norm(x, (a.cols,), wd, a.eps)
    elif a.op == "layernorm":
        wd, bd = w.to(dt), b.to(dt)
        run = lambda: F.layer_norm(x, (a.cols,), wd, bd, a.eps)
    else:
        run = lambda: x.sum(dim=-1, dtype=torch.float32)
    times = time_ms(torch, run, a.repeats, a.warmup)
    print(json.dumps({
        "op": a.op, "rows": a.rows, "cols": a.cols, "dtype": a.dtype,
        "median_ms": statistics.median(times), "min_ms": min(times), "repeats": a.repeats,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
