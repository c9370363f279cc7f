#!/usr/bin/env python3
"""Initial-value microbenchmarks for calibration/sm_90a.toml, run on the project's H200.

These are *not* the Cake-IR microbenchmarks the recalibration runner will use (see
calibration/README.md); they are CUDA C++ / PTX probes (through CuPy's NVRTC) and library calls
(PyTorch / cuBLAS) that give the cost model's initial parameters measured values instead of
datasheet numbers. Every probe is independent: one that fails records its error and the rest run.

Usage (on the device machine):  python3 calibration/microbench/h200_ceilings.py  [$OUT/h200_ceilings.json]
Prints one `name = value  # unit` line per result and writes all of them as JSON.
"""
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

import cupy as cp
import torch

RESULTS = {}
ERRORS = {}


def probe(fn):
    name = fn.__name__
    t0 = time.time()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - record and go on
        ERRORS[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"
    print(f"# probe {name}: {time.time() - t0:.1f} s", flush=True)
    return fn


def put(name, value, unit, **extra):
    RESULTS[name] = {"value": value, "unit": unit, **extra}
    print(f"{name} = {value!r}  # {unit} {extra if extra else ''}", flush=True)


def event_ms(launch, reps=10, warm=3):
    """Median device time of `launch()` in ms, timed with CUDA events (torch stream)."""
    for _ in range(warm):
        launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        launch()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times), times


# CuPy kernels run on CuPy's current stream; make it torch's so events bracket them.
def cupy_on_torch_stream():
    return cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


SRC = r"""
extern "C" {

__global__ void read_bw(const float4* __restrict__ p, unsigned long long n4, int reps, float* out) {
    float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f, acc3 = 0.f;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long start = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < reps; ++r) {
        unsigned long long i = start;
        for (; i + 3 * stride < n4; i += 4 * stride) {
            float4 a = __ldcg(p + i), b = __ldcg(p + i + stride), c = __ldcg(p + i + 2 * stride), d = __ldcg(p + i + 3 * stride);
            acc0 += a.x + a.y + a.z + a.w; acc1 += b.x + b.y + b.z + b.w;
            acc2 += c.x + c.y + c.z + c.w; acc3 += d.x + d.y + d.z + d.w;
        }
        for (; i < n4; i += stride) { float4 a = __ldcg(p + i); acc0 += a.x + a.y + a.z + a.w; }
    }
    float acc = acc0 + acc1 + acc2 + acc3;
    if (acc == 1234.5f) out[0] = acc;
}

__global__ void chase(const unsigned* __restrict__ next, int hops, unsigned long long* out) {
    unsigned j = 0;
    for (int i = 0; i < 64; ++i) j = __ldcg(next + j);           // warm the TLB / path
    long long t0 = clock64();
    for (int i = 0; i < hops; ++i) j = __ldcg(next + j);
    long long t1 = clock64();
    out[0] = (unsigned long long)(t1 - t0);
    out[1] = j;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned a, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(a), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned a) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(a) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned a, unsigned parity) {
    unsigned ok = 0;
    while (!ok) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(ok) : "r"(a), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

// Two warps hand a token back and forth through two mbarriers: cycles per hand-off.
__global__ void mbar_pingpong(int iters, unsigned long long* out) {
    __shared__ __align__(8) unsigned long long bar[2];
    unsigned b0 = smem_addr(&bar[0]), b1 = smem_addr(&bar[1]);
    if (threadIdx.x == 0) { mbar_init(b0, 1); mbar_init(b1, 1); }
    __syncthreads();
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned long long g0 = globaltimer();
    long long t0 = clock64();
    unsigned phase = 0;
    for (int i = 0; i < iters; ++i) {
        if (warp == 0) { if (lane == 0) mbar_arrive(b0); mbar_wait(b1, phase); }
        else           { mbar_wait(b0, phase); if (lane == 0) mbar_arrive(b1); }
        phase ^= 1;
    }
    long long t1 = clock64();
    unsigned long long g1 = globaltimer();
    if (threadIdx.x == 0) { out[0] = (unsigned long long)(t1 - t0); out[1] = g1 - g0; }
}

// Bulk (TMA-engine) copy global -> shared completed on an mbarrier: cycles from issue to wait return.
__global__ void bulk_latency(const char* src, unsigned long long span, int bytes, int iters, unsigned long long* out) {
    extern __shared__ __align__(128) char buf[];
    __shared__ __align__(8) unsigned long long bar;
    unsigned b = smem_addr(&bar), dst = smem_addr(buf);
    if (threadIdx.x == 0) {
        mbar_init(b, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        unsigned phase = 0;
        unsigned long long total = 0;
        for (int i = 0; i < iters; ++i) {
            unsigned long long off = ((unsigned long long)i * 7919ull * (unsigned long long)bytes + 4096ull * i) % (span - bytes);
            off &= ~127ull;
            long long t0 = clock64();
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(dst), "l"(src + off), "r"(bytes), "r"(b) : "memory");
            mbar_wait(b, phase);
            phase ^= 1;
            total += (unsigned long long)(clock64() - t0);
        }
        out[0] = total;
    }
}

__global__ void bar_sync_loop(int iters, unsigned long long* out) {
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
}

// Throughput kernels: 8 independent chains per thread.
__global__ void ffma_tp(int iters, float a, float b, float* out) {
    float x[8];
    #pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = threadIdx.x + k;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = fmaf(x[k], a, b);
    }
    float s = 0; for (int k = 0; k < 8; ++k) s += x[k];
    if (s == 1234.5f) out[0] = s;
}

__global__ void mufu_tp(int iters, float* out) {
    float x[8];
    #pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = (threadIdx.x + k) * 1e-3f;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x[k])); x[k] = y; }
    }
    float s = 0; for (int k = 0; k < 8; ++k) s += x[k];
    if (s == 1234.5f) out[0] = s;
}

__global__ void shfl_tp(int iters, float* out) {
    float x[8];
    #pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = threadIdx.x + k;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) x[k] = __shfl_xor_sync(0xffffffffu, x[k], 1 + (k & 1));
    }
    float s = 0; for (int k = 0; k < 8; ++k) s += x[k];
    if (s == 1234.5f) out[0] = s;
}

// One argmin step per element: compare, then select value and index (the reduce_argmin inner loop).
__global__ void argmin_tp(int iters, float* out) {
    float best[8]; int bi[8]; float v[8];
    #pragma unroll
    for (int k = 0; k < 8; ++k) { best[k] = 1e30f; bi[k] = 0; v[k] = (threadIdx.x * 7 + k) % 13; }
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 8; ++k) {
            float c = v[k] - (float)(i & 7);
            bool lt = c < best[k];
            best[k] = lt ? c : best[k];
            bi[k] = lt ? i : bi[k];
        }
    }
    float s = 0; for (int k = 0; k < 8; ++k) s += best[k] + bi[k];
    if (s == 1234.5f) out[0] = s;
}

__global__ void empty_kernel() {}

__global__ void empty_big(int) { extern __shared__ char s[]; if (threadIdx.x == 1023) s[0] = 0; }
}
"""


def mod():
    global _MOD
    if "_MOD" not in globals():
        _MOD = cp.RawModule(code=SRC, options=("-std=c++17",), name_expressions=None)
    return _MOD


def launch(kname, grid, block, args, smem=0):
    k = mod().get_function(kname)
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    with cupy_on_torch_stream():
        k((grid,), (block,), args, shared_mem=smem)


@probe
def device_facts():
    p = torch.cuda.get_device_properties(0)
    put("device_name", p.name, "text")
    put("sm_count", p.multi_processor_count, "SMs")
    put("l2_bytes", getattr(p, "L2_cache_size", None), "bytes")
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        put("nvidia_smi_idle", out, "driver, sm MHz, max sm MHz, mem MHz, power limit")
    except Exception as e:  # noqa: BLE001
        put("nvidia_smi_idle", str(e), "error")


@probe
def gemm_bf16():
    for (m, n, k) in [(8192, 8192, 8192), (8192, 8192, 1024), (8192, 8192, 256), (8192, 8192, 64)]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ms, times = event_ms(lambda: torch.matmul(a, b.t()), reps=20, warm=5)
        put(f"cublas_bf16_{m}x{n}x{k}_ms", ms, "ms (median of 20)", tflops=2 * m * n * k / ms / 1e9,
            spread=[min(times), max(times)])
        del a, b
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        put("sm_clock_after_gemm", out, "MHz (nvidia-smi right after the GEMMs)")
    except Exception:  # noqa: BLE001
        pass


@probe
def gemm_fp8():
    m = n = k = 8192
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    f = lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    ms, times = event_ms(f, reps=20, warm=5)
    put("cublas_fp8_8192x8192x8192_ms", ms, "ms (median of 20)", tflops=2 * m * n * k / ms / 1e9,
        spread=[min(times), max(times)])


@probe
def copy_bw():
    n = 2 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms, _ = event_ms(lambda: dst.copy_(src), reps=10)
    put("d2d_copy_bytes_per_s", 2 * n / ms * 1e3, "B/s (read + write counted)", ms=ms)


@probe
def dram_read_bw():
    n = 4 << 30
    buf = cp.ones(n // 4, dtype=cp.float32)
    out = cp.zeros(1, dtype=cp.float32)
    n4 = n // 16
    ms, _ = event_ms(lambda: launch("read_bw", 132 * 8, 512, (buf, cp.uint64(n4), cp.int32(1), out)), reps=10)
    put("dram_read_bytes_per_s", n / ms * 1e3, "B/s (read-only kernel, 4 GiB)", ms=ms)


@probe
def l2_read_bw():
    for mb in (8, 24):
        n = mb << 20
        buf = cp.ones(n // 4, dtype=cp.float32)
        out = cp.zeros(1, dtype=cp.float32)
        reps = 400
        ms, _ = event_ms(lambda: launch("read_bw", 132 * 4, 512, (buf, cp.uint64(n // 16), cp.int32(reps), out)), reps=7)
        put(f"l2_read_bytes_per_s_{mb}MB", n * reps / ms * 1e3, f"B/s (read-only kernel, {mb} MiB resident, all SMs)", ms=ms)
    # Per-SM ingest: 16 blocks forced one per SM by their shared memory.
    n = 8 << 20
    buf = cp.ones(n // 4, dtype=cp.float32)
    reps = 100
    ms, _ = event_ms(lambda: launch("read_bw", 16, 1024, (buf, cp.uint64(n // 16), cp.int32(reps), out), smem=150 * 1024), reps=5)
    put("l2_read_bytes_per_s_per_sm", n * reps / ms * 1e3 / 16, "B/s per SM (16 SMs, one 1024-thread block each, L2-resident)", ms=ms)


@probe
def latency_chase():
    res = cp.zeros(2, dtype=cp.uint64)
    for label, span_mb in (("dram", 1024), ("l2", 4)):
        n = (span_mb << 20) // 4
        # a random cycle with a 128-byte stride (one element per line)
        lines = n // 32
        perm = cp.random.permutation(lines).astype(cp.uint32) * 32
        nxt = cp.zeros(n, dtype=cp.uint32)
        nxt[perm] = cp.roll(perm, -1)
        hops = 20000
        launch("chase", 1, 1, (nxt, cp.int32(hops), res))
        torch.cuda.synchronize()
        launch("chase", 1, 1, (nxt, cp.int32(hops), res))
        torch.cuda.synchronize()
        put(f"load_latency_{label}_cycles", float(res[0].get()) / hops, f"cycles per dependent ld.global.cg ({span_mb} MiB random cycle)")


@probe
def mbarrier_roundtrip():
    res = cp.zeros(2, dtype=cp.uint64)
    iters = 100000
    launch("mbar_pingpong", 1, 64, (cp.int32(iters), res))
    torch.cuda.synchronize()
    launch("mbar_pingpong", 1, 64, (cp.int32(iters), res))
    torch.cuda.synchronize()
    cyc, ns = float(res[0].get()), float(res[1].get())
    put("mbarrier_handoff_cycles", cyc / (2 * iters), "cycles from arrive in one warp to try_wait returning in another")
    put("sm_clock_ghz_light_load", cyc / ns, "GHz (clock64 / globaltimer over the ping-pong)")


@probe
def bulk_copy_latency():
    res = cp.zeros(1, dtype=cp.uint64)
    span = 2 << 30
    src = cp.ones(span // 4, dtype=cp.float32)
    for bytes_ in (4096, 16384, 32768):
        iters = 2000
        launch("bulk_latency", 1, 32, (src, cp.uint64(span), cp.int32(bytes_), cp.int32(iters), res), smem=bytes_)
        torch.cuda.synchronize()
        put(f"bulk_copy_latency_dram_{bytes_}B_cycles", float(res[0].get()) / iters, "cycles, issue to complete_tx (random offsets in 2 GiB)")
    small = 1 << 20
    for bytes_ in (4096, 16384, 32768):
        iters = 2000
        launch("bulk_latency", 1, 32, (src, cp.uint64(small), cp.int32(bytes_), cp.int32(iters), res), smem=bytes_)
        torch.cuda.synchronize()
        launch("bulk_latency", 1, 32, (src, cp.uint64(small), cp.int32(bytes_), cp.int32(iters), res), smem=bytes_)
        torch.cuda.synchronize()
        put(f"bulk_copy_latency_l2_{bytes_}B_cycles", float(res[0].get()) / iters, "cycles, issue to complete_tx (1 MiB span, L2-resident)")


@probe
def bar_sync():
    res = cp.zeros(1, dtype=cp.uint64)
    iters = 20000
    for threads in (128, 384):
        launch("bar_sync_loop", 1, threads, (cp.int32(iters), res))
        torch.cuda.synchronize()
        put(f"bar_sync_cycles_{threads}t", float(res[0].get()) / iters, f"cycles per __syncthreads, {threads} threads, one block")


@probe
def alu_throughput():
    out = cp.zeros(1, dtype=cp.float32)
    sms = 132
    ghz = RESULTS.get("sm_clock_ghz_light_load", {}).get("value", 1.98)
    blocks, threads, iters = sms * 8, 256, 4096
    for kname, per_iter, args in (
        ("ffma_tp", 8, (cp.int32(iters), cp.float32(0.999), cp.float32(0.001), out)),
        ("mufu_tp", 8, (cp.int32(iters), out)),
        ("shfl_tp", 8, (cp.int32(iters), out)),
        ("argmin_tp", 8, (cp.int32(iters), out)),
    ):
        ms, _ = event_ms(lambda: launch(kname, blocks, threads, args), reps=7)
        elems = blocks * threads * iters * per_iter
        put(f"{kname}_elems_per_clk_per_sm", elems / (ms * 1e-3) / (ghz * 1e9) / sms,
            "thread-level elements per SM clock (clock: sm_clock_ghz_light_load)", ms=ms)


@probe
def launch_overhead():
    ms, _ = event_ms(lambda: launch("empty_kernel", 1, 32, ()), reps=200, warm=20)
    put("empty_kernel_event_ms", ms, "ms (events around one empty launch, median of 200)")
    n = 1000

    def many():
        for _ in range(n):
            launch("empty_kernel", 1, 32, ())
    ms, _ = event_ms(many, reps=5)
    put("empty_kernel_back_to_back_us", ms * 1e3 / n, "us per launch, 1000 back-to-back empty launches")
    waves = 64
    ms, _ = event_ms(lambda: launch("empty_big", 132 * waves, 1024, (cp.int32(0),), smem=200 * 1024), reps=10)
    ms1, _ = event_ms(lambda: launch("empty_big", 132, 1024, (cp.int32(0),), smem=200 * 1024), reps=10)
    put("cta_wave_overhead_us", (ms - ms1) * 1e3 / (waves - 1), "us per extra wave of 132 one-per-SM 1024-thread blocks (200 KB smem)", ms=ms, ms1=ms1)


def nvcc_module(src, name):
    """Build with the machine's nvcc for sm_90a (wgmma needs the 'a' target) and load the cubin."""
    import tempfile
    d = tempfile.mkdtemp()
    cu, cubin = os.path.join(d, name + ".cu"), os.path.join(d, name + ".cubin")
    with open(cu, "w") as f:
        f.write(src)
    nvcc = "nvcc" if subprocess.run(["which", "nvcc"], capture_output=True).returncode == 0 else "/usr/local/cuda/bin/nvcc"
    r = subprocess.run([nvcc, "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-o", cubin, cu],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    RESULTS.setdefault("_ptxas", {})[name] = r.stderr.strip()[-600:]
    return cp.RawModule(path=cubin)


# ---------------------------------------------------------------------------------------------
# TMA-engine streaming: one CTA per SM keeps STAGES bulk copies in flight (what a TMA producer does).
STREAM_SRC = r"""
extern "C" __global__ void bulk_stream(const char* src, unsigned long long span, int bytes, int iters, int share,
                                       unsigned long long* out) {
    extern __shared__ __align__(128) char buf[];
    __shared__ __align__(8) unsigned long long bar[8];
    const int STAGES = 4;
    if (threadIdx.x != 0) return;
    unsigned b0 = (unsigned)__cvta_generic_to_shared(&bar[0]);
    unsigned d0 = (unsigned)__cvta_generic_to_shared(buf);
    for (int s = 0; s < STAGES; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b0 + 8 * s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    unsigned long long group = blockIdx.x / share;
    for (int i = 0; i < iters + STAGES; ++i) {
        int s = i % STAGES;
        unsigned b = b0 + 8 * s;
        if (i >= STAGES) {
            unsigned parity = ((i / STAGES) - 1) & 1, ok = 0;
            while (!ok) asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                                     : "=r"(ok) : "r"(b), "r"(parity) : "memory");
        }
        if (i < iters) {
            unsigned long long off = ((group * 104729ull + (unsigned long long)i) * (unsigned long long)bytes) % (span - bytes);
            off &= ~127ull;
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         :: "r"(d0 + s * bytes), "l"(src + off), "r"(bytes), "r"(b) : "memory");
        }
    }
    if (blockIdx.x == 0) out[0] = 1;
}
"""


@probe
def tma_stream_bw():
    m = cp.RawModule(code=STREAM_SRC, options=("-std=c++17",))
    k = m.get_function("bulk_stream")
    k.max_dynamic_shared_size_bytes = 4 * 32768 + 1024
    out = cp.zeros(1, dtype=cp.uint64)
    big = 4 << 30
    src = cp.ones(big // 4, dtype=cp.float32)
    sms = 132
    for label, span, share, bytes_, iters in (
        ("l2_8MB", 8 << 20, 1, 32768, 2000),
        ("l2_8MB_16KB", 8 << 20, 1, 16384, 4000),
        ("dram", big, 1, 32768, 800),
        ("dram_shared4", big, 4, 32768, 800),
        ("dram_shared32", big, 32, 32768, 800),
    ):
        def go():
            with cupy_on_torch_stream():
                k((sms,), (32,), (src, cp.uint64(span), cp.int32(bytes_), cp.int32(iters), cp.int32(share), out),
                  shared_mem=4 * 32768 + 1024)
        ms, _ = event_ms(go, reps=7)
        total = sms * iters * bytes_
        put(f"tma_stream_{label}_bytes_per_s", total / ms * 1e3,
            f"B/s delivered to shared memory, {sms} CTAs x 4 stages x {bytes_} B bulk copies, {share} CTAs read each address", ms=ms)


# ---------------------------------------------------------------------------------------------
# wgmma throughput: WG warpgroups per CTA, one CTA per SM, each iteration = fence, 4 x m64nNk16
# (one 64-wide K block, like the example GEMM's stage), commit, wait_group(WAIT).
def wgmma_src(n, wait):
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    asm = (f'"{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n'
           f' wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, 0, 0;\\n}}\\n"')
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return r"""
extern "C" __global__ void __launch_bounds__(256, 1) wgmma_tp(int iters, float* out) {
    extern __shared__ char raw[];
    unsigned base = (unsigned)__cvta_generic_to_shared(raw);
    unsigned pad = (1024 - (base & 1023)) & 1023;
    char* sm = raw + pad;
    const int A_BYTES = 64 * 64 * 2, B_BYTES = %(N)d * 64 * 2;
    int nwg = blockDim.x / 128, wg = threadIdx.x / 128;
    unsigned* w = (unsigned*)sm;
    int words = (nwg * A_BYTES + B_BYTES) / 4;
    for (int i = threadIdx.x; i < words; i += blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u + blockIdx.x * 97u;
        w[i] = (0x3f00u | (h & 0x7fu)) | ((0x3f00u | ((h >> 8) & 0x7fu)) << 16);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    unsigned a_addr = base + pad + wg * A_BYTES, b_addr = base + pad + nwg * A_BYTES;
    unsigned long long da = ((unsigned long long)((a_addr & 0x3FFFF) >> 4)) | (1ull << 16) | (64ull << 32) | (1ull << 62);
    unsigned long long db = ((unsigned long long)((b_addr & 0x3FFFF) >> 4)) | (1ull << 16) | (64ull << 32) | (1ull << 62);
    float d[%(R)d];
    #pragma unroll
    for (int i = 0; i < %(R)d; ++i) d[i] = 0.f;
    for (int it = 0; it < iters; ++it) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            unsigned long long a = da + 2 * k, b = db + 2 * k;
            int scale = 1;
            asm volatile(%(ASM)s : %(CONS)s : "l"(a), "l"(b), "r"(scale));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned %(WAIT)d;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < %(R)d; ++i) s += d[i];
    if (s == 1234.5f) out[0] = s;
}
""" % {"N": n, "R": regs, "ASM": asm, "CONS": cons, "WAIT": wait}


@probe
def wgmma_throughput():
    out = cp.zeros(1, dtype=cp.float32)
    sms = 132
    for n in (256, 128, 64):
        for wait in (0, 1):
            m = nvcc_module(wgmma_src(n, wait), f"wgmma_n{n}_w{wait}")
            k = m.get_function("wgmma_tp")
            for nwg in (2, 1):
                smem = 1024 + nwg * 64 * 64 * 2 + n * 64 * 2
                k.max_dynamic_shared_size_bytes = smem
                # force one CTA per SM
                smem_launch = max(smem, 120 * 1024)
                k.max_dynamic_shared_size_bytes = smem_launch
                iters = 4000

                def go():
                    with cupy_on_torch_stream():
                        k((sms,), (128 * nwg,), (cp.int32(iters), out), shared_mem=smem_launch)
                ms, _ = event_ms(go, reps=7)
                flops = sms * nwg * iters * 4 * 2 * 64 * n * 16
                put(f"wgmma_m64n{n}_wg{nwg}_wait{wait}_flops_per_s", flops / ms * 1e3,
                    f"FLOP/s, {sms} CTAs x {nwg} warpgroups, iteration = 4 x m64n{n}k16 + commit + wait_group({wait})",
                    ms=ms, ns_per_iter=ms * 1e6 / iters)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("OUT", "."), "h200_ceilings.json")
    record = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "torch": torch.__version__, "cupy": cp.__version__,
              "results": RESULTS, "errors": ERRORS}
    with open(out_path, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(ERRORS, indent=1)[:4000])


if __name__ == "__main__":
    main()
