#!/usr/bin/env python3
"""Time a torch operation as the same-machine peer of a Cake kernel (benchmarks/RESULTS.md).

    python3 benchmarks/torch_peer.py softmax --rows 65536 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py rmsnorm|layernorm|rowsum ...
    python3 benchmarks/torch_peer.py rope --rows 8192 --cols 4096 --head-dim 128 --dtype bf16
    python3 benchmarks/torch_peer.py fp8quant --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py gemv --rows 14336 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py fp8quant_block --rows 8192 --cols 7168 --dtype bf16 --fp8 e4m3
    python3 benchmarks/torch_peer.py cross_entropy --rows 8192 --cols 128256 --dtype bf16
    python3 benchmarks/torch_peer.py rmsnorm_bwd --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py softmax_bwd --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py layernorm_bwd --rows 8192 --cols 4096 --dtype bf16
    python3 benchmarks/torch_peer.py cross_entropy_bwd --rows 16384 --cols 32000 --dtype bf16
    python3 benchmarks/torch_peer.py topk --rows 16384 --cols 256 --k 8 --dtype f32
    python3 benchmarks/torch_peer.py embedding --rows 8192 --cols 4096 --vocab 128256 --dtype bf16
    python3 benchmarks/torch_peer.py kmeans_scatter --rows 262144 --cols 128 --vocab 1024 --dtype bf16
    python3 benchmarks/torch_peer.py attention --rows 128 --cols 4096 --head-dim 128 --dtype bf16 --causal --backend cudnn

attention is F.scaled_dot_product_attention on Q, K, V [1, rows, cols, head_dim] (rows = batch·heads,
cols = the sequence length; V in its natural [S, HD] layout, where the Cake kernel reads Vᵀ) with
--scale (default 0.125, the corpus workloads' scale), is_causal
from --causal (query i sees keys 0..=i), through one SDPA backend (--backend cudnn or flash, forced
with torch.nn.attention.sdpa_kernel; exit 3 when torch lacks it). 32 query rows of 4 heads are
checked against an fp64 softmax before timing.

cross_entropy is F.cross_entropy(reduction="none") on [rows, cols] logits with int64 targets
(the Cake kernel's f32 loss per row); rmsnorm_bwd is autograd's input gradient of F.rms_norm
(dgamma is computed too; the Cake kernel leaves it out). Both outputs are checked against fp64
on 64 sampled rows before timing (exit 1 when they disagree). softmax_bwd is autograd's input
gradient of torch.softmax (Y = softmax(X) saved by the forward, as the Cake kernel reads Y);
layernorm_bwd is autograd's input gradient of F.layer_norm with a weight and bias that do not
require grad, so torch computes dx alone, as the Cake kernel does. Both are checked against fp64
on 64 sampled rows too.

cross_entropy_bwd is autograd's logits gradient of F.cross_entropy(reduction="mean") with a
retained graph: only the backward is timed (nll_loss's backward, a zero [rows, cols] gradient with
-1/rows scattered at the targets, then log_softmax's backward from the log-probabilities the
forward saved), which is what a training step runs for this gradient; the Cake kernel instead
recomputes the softmax from the logits and takes the scale (1/rows) as an argument. Checked against
fp64 (softmax − one-hot)/rows on 64 sampled rows. topk is torch.topk(x, k, dim=-1) (sorted,
largest first) on [rows, cols] values; its values are checked exactly against a sort of 64 sampled
rows and its indices by gathering them back.

embedding is F.embedding(ids, E) with E [vocab, cols] in --dtype and int32 ids [rows] drawn
uniformly from [0, vocab) (the Cake kernel reads int32 ids; F.embedding takes them as they are):
the gathered rows are checked exactly, bit for bit, against E[ids] (index_select) before timing.

kmeans_scatter is the KMeans centroid update by scatter-add in eager torch: SUMS.index_add_(0, ids, X)
(X [rows, cols] in --dtype, added as f32) and COUNTS.index_add_(0, ids, 1) (int32) for int32 ids
drawn uniformly from [0, --vocab) clusters, onto what SUMS and COUNTS hold (the Cake kernel's are
inout too): the first call, from zero, is checked against fp64 sums of 64 sampled clusters within
n_k·2^-24 of their summed magnitudes and against bincount.

gemv is F.linear(v[None, :], W) with W [rows, cols] and v [cols] in --dtype (the decode-time
M = 1 projection as vLLM issues it; torch's output is in --dtype where the Cake kernel may store
f32), checked against fp64 on 256 sampled rows. fp8quant_block is DeepSeek-V3's 1×128-group
activation quantization in eager torch: X viewed as [rows, cols/128, 128], each group's absmax /
QMAX (448 for --fp8 e4m3, 57344 for e5m2) floored at --min-scale as an f32 scale, the group
divided by it and cast to torch.float8_e4m3fn / float8_e5m2 (saturated first); every element and
scale checked against fp64 like fp8quant.

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
    p.add_argument("op", choices=["softmax", "rmsnorm", "layernorm", "rowsum", "rope", "fp8quant", "cross_entropy", "rmsnorm_bwd", "softmax_bwd", "layernorm_bwd", "cross_entropy_bwd", "topk", "gemv", "fp8quant_block", "embedding", "kmeans_scatter", "attention"])
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--head-dim", type=int, default=128, help="rope: the head_dim D (--cols is H·D)")
    p.add_argument("--k", type=int, default=8, help="topk: how many of each row's largest values")
    p.add_argument("--vocab", type=int, default=0, help="embedding: the table's rows V (--cols is its width H); kmeans_scatter: the clusters K")
    p.add_argument("--min-scale", type=float, default=1.0 / (448.0 * 512.0), help="fp8quant: the scale's floor")
    p.add_argument("--fp8", choices=["e4m3", "e5m2"], default="e4m3", help="fp8quant_block: the fp8 format")
    p.add_argument("--causal", action="store_true", help="attention: query i sees keys 0..=i (is_causal)")
    p.add_argument("--backend", choices=["cudnn", "flash"], default="cudnn", help="attention: the SDPA backend timed")
    p.add_argument("--scale", type=float, default=0.125, help="attention: the softmax scale")
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
    if a.op == "attention":
        # rows = batch·heads, cols = sequence length: x above is not used.
        bh, sq, hd = a.rows, a.cols, a.head_dim
        del x
        q, k, v = (torch.randn(1, bh, sq, hd, device=dev, dtype=torch.float32, generator=g).to(dt) for _ in range(3))
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            print("torch_peer: this torch has no torch.nn.attention.sdpa_kernel", file=sys.stderr)
            return 3
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[a.backend]

        def run():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=a.causal, scale=a.scale)

        try:
            got = run()
        except RuntimeError as e:
            print(f"torch_peer: SDPA backend {a.backend} cannot run this shape: {e}", file=sys.stderr)
            return 3
        for h in range(0, bh, max(1, bh // 4)):
            rows = torch.randint(0, sq, (32,), device=dev, generator=g)
            s64 = (q[0, h, rows].double() @ k[0, h].double().T) * a.scale
            if a.causal:
                keys = torch.arange(sq, device=dev)
                s64 = s64.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
            want = torch.softmax(s64, dim=-1) @ v[0, h].double()
            err = (got[0, h, rows].double() - want).abs().max().item()
            if not err <= 2e-2 * max(want.abs().max().item(), 1e-3):
                print(f"torch_peer: attention ({a.backend}) head {h} off by {err}", file=sys.stderr)
                return 1
    elif a.op == "softmax":
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
    elif a.op == "cross_entropy_bwd":
        t = torch.randint(0, a.cols, (a.rows,), device=dev, generator=g)
        xg = x.detach().requires_grad_(True)
        loss = F.cross_entropy(xg, t, reduction="mean")
        run = lambda: torch.autograd.grad(loss, xg, retain_graph=True)[0]
        rows = torch.randperm(a.rows, device=dev, generator=g)[:64]
        x64 = x[rows].double()
        want = torch.softmax(x64, dim=-1)
        want[torch.arange(rows.numel(), device=dev), t[rows]] -= 1.0
        want /= a.rows
        got = run()[rows].double()
        # The gradient is in the logits' dtype, from log-probabilities the forward stored in it:
        # a bf16 log-probability near -ln V is off by up to 2^-9 · 12, a few percent of its exp.
        # atol is relative to the target's |p − 1|/rows, the largest element of a row.
        tol = 5e-2 if dt != torch.float32 else 1e-4
        if not torch.allclose(got, want, rtol=tol, atol=tol * want.abs().max().item()):
            print(f"torch_peer: cross_entropy_bwd disagrees with fp64 by {(got - want).abs().max().item():.3e}", file=sys.stderr)
            return 1
    elif a.op == "topk":
        if not 1 <= a.k <= a.cols:
            print(f"torch_peer: --k {a.k} must be in [1, --cols {a.cols}]", file=sys.stderr)
            return 2
        run = lambda: torch.topk(x, a.k, dim=-1, largest=True, sorted=True)
        vals, idx = run()
        rows = torch.randperm(a.rows, device=dev, generator=g)[:64]
        want = x[rows].double().sort(dim=-1, descending=True).values[:, :a.k]
        bad_v = (vals[rows].double() != want).sum().item()
        bad_i = (x[rows].gather(1, idx[rows]).double() != want).sum().item()
        if bad_v or bad_i:
            print(f"torch_peer: topk: {bad_v} values and {bad_i} indices wrong", file=sys.stderr)
            return 1
    elif a.op == "embedding":
        if a.vocab < 1:
            print("torch_peer: embedding needs --vocab V >= 1 (the table's rows)", file=sys.stderr)
            return 2
        table = torch.randn(a.vocab, a.cols, device=dev, dtype=torch.float32, generator=g).to(dt)
        ids = torch.randint(0, a.vocab, (a.rows,), device=dev, dtype=torch.int32, generator=g)
        run = lambda: F.embedding(ids, table)
        got, want = run(), table.index_select(0, ids.long())
        # Bit for bit (a copy keeps every bit, the sign of zero included).
        if got.shape != want.shape or not torch.equal(got.contiguous().view(torch.uint8), want.view(torch.uint8)):
            bad = (got.double() != want.double()).sum().item() if got.shape == want.shape else got.numel()
            print(f"torch_peer: embedding: {bad} elements differ from E[ids]", file=sys.stderr)
            return 1
    elif a.op == "kmeans_scatter":
        if a.vocab < 1:
            print("torch_peer: kmeans_scatter needs --vocab K >= 1 (the clusters)", file=sys.stderr)
            return 2
        # x is the points X [rows, cols]; ids the int32 cluster of each point, uniform over [0, K).
        ids = torch.randint(0, a.vocab, (a.rows,), device=dev, dtype=torch.int32, generator=g)
        sums = torch.zeros(a.vocab, a.cols, device=dev, dtype=torch.float32)
        counts = torch.zeros(a.vocab, device=dev, dtype=torch.int32)
        idl = ids.long()

        ones = torch.ones_like(ids)

        def run():
            # Onto what SUMS and COUNTS hold, as the Cake kernel's inout tensors (no zeroing).
            sums.index_add_(0, idl, x.float())
            counts.index_add_(0, idl, ones)
            return sums, counts

        s, c = run()
        want_c = torch.bincount(idl, minlength=a.vocab)
        rows = torch.randperm(a.vocab, device=dev, generator=g)[:64]
        want_s = torch.zeros(64, a.cols, device=dev, dtype=torch.float64)
        for j, k in enumerate(rows.tolist()):
            want_s[j] = x[idl == k].double().sum(dim=0)
        # f32 additions in any order: n_k · 2^-24 of the summed magnitudes (the Cake oracle's bound).
        mag = torch.stack([x[idl == k].double().abs().sum(dim=0) for k in rows.tolist()])
        n_k = want_c[rows].double()[:, None]
        bad_s = ((s[rows].double() - want_s).abs() > n_k * 2.0**-24 * mag * (1 + 1e-6)).sum().item()
        bad_c = (c.long() != want_c).sum().item()
        if bad_s or bad_c:
            print(f"torch_peer: kmeans_scatter: {bad_s} sums and {bad_c} counts off", file=sys.stderr)
            return 1
    elif a.op == "gemv":
        # x is the weight W [rows, cols]; v the activation vector, one row of a decode batch.
        v = torch.randn(a.cols, device=dev, dtype=torch.float32, generator=g).to(dt)
        run = lambda: F.linear(v[None, :], x)[0]
        rows = torch.randperm(a.rows, device=dev, generator=g)[:256]
        want = x[rows].double() @ v.double()
        got = run()[rows].double()
        # One rounding to --dtype (2^-8 / 2^-11 of the value) on top of f32 accumulation;
        # atol is relative to the RMS of the sampled outputs (~sqrt(cols)).
        tol = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-4}[dt]
        rms = want.pow(2).mean().sqrt().item()
        if not torch.allclose(got, want, rtol=tol, atol=tol * rms):
            print(f"torch_peer: gemv disagrees with fp64 by {(got - want).abs().max().item():.3e}", file=sys.stderr)
            return 1
    elif a.op == "fp8quant_block":
        group = 128
        if a.cols % group:
            print(f"torch_peer: --cols {a.cols} is not a multiple of the group size {group}", file=sys.stderr)
            return 2
        qmax, f8 = {"e4m3": (448.0, torch.float8_e4m3fn), "e5m2": (57344.0, torch.float8_e5m2)}[a.fp8]
        xb = x.view(a.rows, a.cols // group, group)

        def run():
            s = (xb.abs().amax(dim=-1, keepdim=True).float() / qmax).clamp(min=a.min_scale)
            return (xb.float() / s).clamp(-qmax, qmax).to(f8).view(a.rows, a.cols), s[..., 0]

        q, s = run()
        xd = xb.double()
        want_s = (xd.abs().amax(dim=-1) / qmax).clamp(min=a.min_scale)
        ref = (xd / s.double()[..., None]).clamp(-qmax, qmax).view(a.rows, a.cols)
        # Round to nearest moves a value by at most half a step: 2^-4 (e4m3) / 2^-3 (e5m2) of it,
        # or half the subnormal spacing (2^-10 / 2^-17).
        rel, sub = {"e4m3": (2.0**-4, 2.0**-10), "e5m2": (2.0**-3, 2.0**-17)}[a.fp8]
        bad_q = ((q.double() - ref).abs() > ref.abs() * rel * (1 + 1e-6) + sub).sum().item()
        bad_s = ((s.double() - want_s).abs() > want_s * 2e-5).sum().item()
        if bad_q or bad_s:
            print(f"torch_peer: fp8quant_block: {bad_q} elements and {bad_s} scales off", file=sys.stderr)
            return 1
    else:
        run = lambda: x.sum(dim=-1, dtype=torch.float32)
    times = time_ms(torch, run, a.repeats, a.warmup)
    print(json.dumps({
        "op": a.op, "rows": a.rows, "cols": a.cols, "dtype": a.dtype,
        **({"head_dim": a.head_dim} if a.op in ("rope", "attention") else {}),
        **({"causal": a.causal, "backend": a.backend} if a.op == "attention" else {}),
        **({"k": a.k} if a.op == "topk" else {}),
        **({"vocab": a.vocab} if a.op in ("embedding", "kmeans_scatter") else {}),
        **({"fp8": a.fp8} if a.op == "fp8quant_block" else {}),
        "median_ms": statistics.median(times), "min_ms": min(times), "repeats": a.repeats,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
