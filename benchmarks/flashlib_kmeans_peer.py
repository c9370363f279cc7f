#!/usr/bin/env python3
"""Time flashlib's Triton Flash-KMeans assign as the same-machine peer of a Cake kernel.

    python3 benchmarks/flashlib_kmeans_peer.py --B 32 --N 65536 --K 1024 --D 128 [--dtype bf16]

flashlib (PyPI, pure Python over Triton) travels to the device as a wheel: carry `.whl` and
install it first (see the device README). The peer is `euclid_assign_triton` with the centroid
norms precomputed, as the Cake kernel gets them (`CN = row_sqnorm(C)`), and flashlib's own
per-architecture heuristic config (`use_heuristic=True`, its default).

Its output is checked before it is timed: for 4096 sampled points the chosen centroid's fp64
distance must be within 1e-3 (relative) of the fp64 minimum, so ties are accepted. Each sample is
timed with CUDA events after an L2 flush (a 256 MB write), the method `cake bench` uses. Prints
one JSON line ending in `median_ms` (what a kernel-evolution command peer reads). Exit 3 without
a CUDA device, torch or flashlib (nothing to measure); exit 1 if the output fails its check.
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
    for d in ("B", "N", "K", "D"):
        p.add_argument(f"--{d}", type=int, required=True)
    p.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    try:
        import torch
    except ImportError:
        print("flashlib_kmeans_peer: torch is not installed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("flashlib_kmeans_peer: no CUDA device", file=sys.stderr)
        return 3
    try:
        import flashlib
        from flashlib.primitives.kmeans import euclid_assign_triton
    except ImportError as e:
        print(f"flashlib_kmeans_peer: flashlib is not installed ({e}); carry its wheel", file=sys.stderr)
        return 3
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(a.seed)
    x = torch.randn(a.B, a.N, a.D, device=dev, dtype=torch.float32, generator=g).to(dt)
    c = torch.randn(a.B, a.K, a.D, device=dev, dtype=torch.float32, generator=g).to(dt)
    c_sq = (c.to(torch.float32) ** 2).sum(-1)
    out = torch.empty(a.B, a.N, device=dev, dtype=torch.int32)
    run = lambda: euclid_assign_triton(x, c, out=out, c_sq=c_sq)

    # The oracle: sampled points, fp64 distances, ties within tolerance accepted.
    run()
    torch.cuda.synchronize()
    gi = torch.Generator(device="cpu").manual_seed(a.seed + 1)
    bs = torch.randint(0, a.B, (4096,), generator=gi)
    ns = torch.randint(0, a.N, (4096,), generator=gi)
    xs = x[bs.to(dev), ns.to(dev)].to(torch.float64)
    cs = c[bs.to(dev)].to(torch.float64)
    dist = ((cs - xs[:, None, :]) ** 2).sum(-1)
    best = dist.min(dim=1).values
    got = dist.gather(1, out[bs.to(dev), ns.to(dev)].long()[:, None]).squeeze(1)
    bad = int((got > best + 1e-3 * best.abs().clamp_min(1e-6)).sum())
    if bad:
        print(f"flashlib_kmeans_peer: {bad} of 4096 sampled points not assigned to a nearest centroid", file=sys.stderr)
        return 1

    times = time_ms(torch, run, a.repeats, a.warmup)
    print(json.dumps({
        "op": "flashlib.euclid_assign_triton", "B": a.B, "N": a.N, "K": a.K, "D": a.D, "dtype": a.dtype,
        "oracle": "pass", "flashlib": getattr(flashlib, "__version__", "?"), "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0), "repeats": a.repeats,
        "min_ms": min(times), "median_ms": statistics.median(times),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
