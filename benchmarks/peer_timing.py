"""The timing loop every Python peer of benchmarks/ uses: warm-up launches, then each sample
timed with CUDA events after an L2 flush (a 256 MB write), the method `cake bench` uses."""


def time_ms(torch, run, repeats, warmup):
    """Milliseconds of `run()` per sample, `repeats` samples after `warmup` untimed launches."""
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        flush.fill_(1)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times
