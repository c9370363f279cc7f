#!/usr/bin/env python3
"""Time a torch operation as the same-machine peer of a Cake kernel (benchmarks/RESULTS.md).

    python3 benchmarks/torch_peer.py softmax --rows 65536 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py rmsnorm|layernorm|rowsum ...
    python3 benchmarks/torch_peer.py rope --rows 8192 --cols 4096 --head-dim 128 --dtype bf16
    python3 benchmarks/torch_peer.py fp8quant --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py cross_entropy --rows 8192 --cols 128256 --dtype bf16
    python3 benchmarks/torch_peer.py rmsnorm_bwd --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py softmax_bwd --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py layernorm_bwd --rows 8192 --cols 4096 --dtype bf16

cross_entropy is F.cross_entropy(reduction="none") on [rows, cols] logits with int64 targets
(the Cake kernel's f32 loss per row); rmsnorm_bwd is autograd's input gradient of F.rms_norm
(dgamma is computed too; the Cake kernel leaves it out). Both outputs are checked against fp64
on 64 sampled rows before timing (exit 1 when they disagree). softmax_bwd is autograd's input
gradient of torch.softmax (Y = softmax(X) saved by the forward, as the Cake kernel reads Y);
layernorm_bwd is autograd's input gradient of F.layer_norm with a weight and bias that do not
require grad, so torch computes dx alone, as the Cake kernel does. Both are checked against fp64
on 64 sampled rows too.

Prints one JSON line: op, shape, dtype, median/min milliseconds over --repeats samples, each timed
with CUDA events after an L2 flush (a 256 MB write), the same method `cake bench` uses.
`rope` (rotate-half, cos/sin tables [rows, head_dim / 2] in f32, Hugging Face's
apply_rotary_pos_emb in eager torch) and `fp8quant` (per-row absmax scale / 448, e4m3 output, as
vLLM's per-token dynamic quantization computes it in torch) check their output against a
reference before timing; a wrong output exits 1.
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
    p.add_argument("op", choices=["softmax", "rmsnorm", "layernorm", "rowsum", "rope", "fp8quant", "cross_entropy", "rmsnorm_bwd", "softmax_bwd", "layernorm_bwd"])
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--head-dim", type=int, default=128, help="rope: the head_dim D (--cols is H·D)")
    p.add_argument("--min-scale", type=float, default=1.0 / (448.0 * 512.0), help="fp8quant: the scale's floor")
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
    elif a.op == "rope":
        half = a.head_dim // 2
        if a.head_dim % 2 or a.cols % a.head_dim:
            print(f"torch_peer: --head-dim {a.head_dim} must be even and divide --cols {a.cols}", file=sys.stderr)
            return 2
        cos = torch.rand(a.rows, half, device=dev, generator=g) * 2 - 1
        sin = torch.rand(a.rows, half, device=dev, generator=g) * 2 - 1
        # HF layout: tables repeated over both halves, broadcast over the heads.
        cos_f = torch.cat([cos, cos], dim=-1).to(dt)[:, None, :]
        sin_f = torch.cat([sin, sin], dim=-1).to(dt)[:, None, :]
        xh = x.view(a.rows, a.cols // a.head_dim, a.head_dim)

        def rotate_half(t):
            return torch.cat([-t[..., half:], t[..., :half]], dim=-1)

        run = lambda: (xh * cos_f + rotate_half(xh) * sin_f).view(a.rows, a.cols)
        xf = xh.float()
        x1, x2 = xf[..., :half], xf[..., half:]
        c, s = cos.to(dt).float()[:, None, :], sin.to(dt).float()[:, None, :]
        want = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).view(a.rows, a.cols)
        # Eager torch rounds each product to the dtype: allow a few of its ulps.
        tol = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 1e-5}[dt]
        err = (run().float() - want).abs().max().item()
        if not err <= tol * max(want.abs().max().item(), 1.0):
            print(f"torch_peer: rope output off by {err}", file=sys.stderr)
            return 1
    elif a.op == "fp8quant":
        qmax = 448.0

        def run():
            s = (x.abs().amax(dim=-1, keepdim=True).float() / qmax).clamp(min=a.min_scale)
            return (x.float() / s).clamp(-qmax, qmax).to(torch.float8_e4m3fn), s

        q, s = run()
        xd = x.double()
        want_s = (xd.abs().amax(dim=-1, keepdim=True) / qmax).clamp(min=a.min_scale)
        ref = (xd / s.double()).clamp(-qmax, qmax)
        # Round to nearest e4m3 moves a value by at most 2^-4 of it (2^-10 in the subnormals).
        bad_q = ((q.double() - ref).abs() > ref.abs() * 2.0**-4 * (1 + 1e-6) + 2.0**-10).sum().item()
        bad_s = ((s.double() - want_s).abs() > want_s * 2e-5).sum().item()
        if bad_q or bad_s:
            print(f"torch_peer: fp8quant: {bad_q} elements and {bad_s} scales off", file=sys.stderr)
            return 1
    elif a.op == "cross_entropy":
        t = torch.randint(0, a.cols, (a.rows,), device=dev, generator=g)
        run = lambda: F.cross_entropy(x, t, reduction="none")
        rows = torch.randperm(a.rows, device=dev, generator=g)[:64]
        x64 = x[rows].double()
        want = torch.logsumexp(x64, dim=-1) - x64.gather(1, t[rows, None])[:, 0]
        got = run()[rows].double()
        # torch returns the loss in the logits' dtype: a bf16 loss near ln V ≈ 12 is within 2^-8 of it.
        tol = 1e-2 if dt != torch.float32 else 1e-4
        if not torch.allclose(got, want, rtol=tol, atol=tol):
            print(f"torch_peer: cross_entropy disagrees with fp64 by {(got - want).abs().max().item():.3e}", file=sys.stderr)
            return 1
    elif a.op == "rmsnorm_bwd":
        wd = w.to(dt).requires_grad_(True)
        xg = x.detach().requires_grad_(True)
        dy = torch.randn(a.rows, a.cols, device=dev, dtype=torch.float32, generator=g).to(dt)
        y = F.rms_norm(xg, (a.cols,), wd, a.eps)
        run = lambda: torch.autograd.grad(y, (xg, wd), dy, retain_graph=True)
        rows = torch.randperm(a.rows, device=dev, generator=g)[:64]
        x64, g64, w64 = x[rows].double(), dy[rows].double(), wd.detach().double()
        rstd = torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + a.eps)
        gw = g64 * w64
        want = rstd * (gw - x64 * rstd * rstd * (gw * x64).mean(-1, keepdim=True))
        got = run()[0][rows].double()
        tol = 2e-2 if dt != torch.float32 else 1e-4
        if not torch.allclose(got, want, rtol=tol, atol=tol * want.abs().max().item()):
            print(f"torch_peer: rmsnorm_bwd disagrees with fp64 by {(got - want).abs().max().item():.3e}", file=sys.stderr)
            return 1
    elif a.op == "softmax_bwd":
        xg = x.detach().requires_grad_(True)
        dy = torch.randn(a.rows, a.cols, device=dev, dtype=torch.float32, generator=g).to(dt)
        y = torch.softmax(xg, dim=-1)
        run = lambda: torch.autograd.grad(y, xg, dy, retain_graph=True)[0]
        rows = torch.randperm(a.rows, device=dev, generator=g)[:64]
        y64, g64 = y.detach()[rows].double(), dy[rows].double()
        want = y64 * (g64 - (g64 * y64).sum(-1, keepdim=True))
        got = run()[rows].double()
        tol = 2e-2 if dt != torch.float32 else 1e-4
        if not torch.allclose(got, want, rtol=tol, atol=tol * want.abs().max().item()):
            print(f"torch_peer: softmax_bwd disagrees with fp64 by {(got - want).abs().max().item():.3e}", file=sys.stderr)
            return 1
    elif a.op == "layernorm_bwd":
        wd, bd = w.to(dt), b.to(dt)
        xg = x.detach().requires_grad_(True)
        dy = torch.randn(a.rows, a.cols, device=dev, dtype=torch.float32, generator=g).to(dt)
        y = F.layer_norm(xg, (a.cols,), wd, bd, a.eps)
        run = lambda: torch.autograd.grad(y, xg, dy, retain_graph=True)[0]
        rows = torch.randperm(a.rows, device=dev, generator=g)[:64]
        x64, g64, w64 = x[rows].double(), dy[rows].double(), wd.double()
        mu = x64.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x64 - mu) ** 2).mean(-1, keepdim=True) + a.eps)
        xhat = (x64 - mu) * rstd
        gw = g64 * w64
        want = rstd * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))
        got = run()[rows].double()
        tol = 2e-2 if dt != torch.float32 else 1e-4
        if not torch.allclose(got, want, rtol=tol, atol=tol * want.abs().max().item()):
            print(f"torch_peer: layernorm_bwd disagrees with fp64 by {(got - want).abs().max().item():.3e}", file=sys.stderr)
            return 1
    else:
        run = lambda: x.sum(dim=-1, dtype=torch.float32)
    times = time_ms(torch, run, a.repeats, a.warmup)
    print(json.dumps({
        "op": a.op, "rows": a.rows, "cols": a.cols, "dtype": a.dtype,
        **({"head_dim": a.head_dim} if a.op == "rope" else {}),
        "median_ms": statistics.median(times), "min_ms": min(times), "repeats": a.repeats,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
