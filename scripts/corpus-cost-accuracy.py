#!/usr/bin/env python3
"""The cost model against GPU timings of the corpus: per family and overall, at each shape (the
gpu-tier shape and the headline shape), Spearman rank correlation, MAPE, the median of
predicted/measured, and top-5 recall within each family of at least 8 cases (of the 5 fastest
measured cases, how many are among the model's 5 fastest).

    cargo build --release -p cake -p cake-plot
    python3 scripts/corpus-cost-accuracy.py RESULTS.json [MORE.json ...] [FAMILY ...] [--svg FILE]
                                            [--calibration FILE] [--predictions FILE] [--cases FILE]

RESULTS.json is either what scripts/device-cost-accuracy.sh measured (schema cake-cost-accuracy/1,
both shapes; shards given as several files are joined) or a corpus gpu-tier results file
(cake-corpus-results, e.g. corpus/results/gpu-h200.json: the gpu-tier shape only). Without a file:
corpus/results/gpu-h200.json, the 8 families of benchmarks/RESULTS.md's 2026-11-30 comparison
unless FAMILY arguments say otherwise. Only runs whose oracle passed count. Predictions come from `cake cost` at each run's own shape (with
`--calibration FILE`: that parameter file instead of the built-in one), or, with `--predictions
FILE`, from a JSON list of {"id", "shape_kind", "predicted_us"} (to score recorded predictions).
`cake` is $CAKE_BIN, else target/release/cake, else target/debug/cake. With --svg FILE it draws
predicted against measured time (log axes, the y = x line, one series per family, both shapes)
with `cake-plot scatter` ($CAKE_PLOT_BIN, else the one beside `cake`), keeping its data in FILE.tsv.
With --cases FILE it writes every scored run as a TSV row (family, id, shape kind, shape, measured
and predicted µs, their ratio, the predicted bottleneck), worst ratio first: where to look next.
Reads only; nothing is fitted.
"""
import json, os, statistics, subprocess, sys, tempfile

TOP_K, TOP_K_MIN_CASES = 5, 8
SHAPE_KINDS = ("gpu-tier", "headline")
DEFAULT_FAMILIES = {"tma-copy", "tma-transpose", "smem-view", "softmax", "row-reduce", "rmsnorm", "layernorm", "elementwise"}


def fail(msg):
    sys.exit(f"error: {msg}")


def find_cake():
    cake = os.environ.get("CAKE_BIN") or next((p for p in ("./target/release/cake", "./target/debug/cake") if os.path.exists(p)), None)
    if not cake or not os.path.exists(cake):
        fail("no `cake` binary (CAKE_BIN, target/release/cake, target/debug/cake)\n  = help: run `cargo build --release -p cake` first, or set CAKE_BIN")
    return cake


def shape_text(s):
    return ",".join(f"{k}={v}" for k, v in s.items())


def ranks(v):
    """1-based ranks, ties averaged (as cake::cost::accuracy::spearman)."""
    idx = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and v[idx[j + 1]] == v[idx[i]]:
            j += 1
        for k in range(i, j + 1):
            r[idx[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(x, y):
    """Pearson correlation of the ranks; None below 2 points or when one side is constant."""
    if len(x) < 2:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx and vy else None


def mape(p, m):
    return 100 * sum(abs(a - b) / b for a, b in zip(p, m)) / len(p)


def top_k_hits(p, m, k):
    """Of the k smallest measured, how many are among the k smallest predicted (ties by order)."""
    top = lambda v: set(sorted(range(len(v)), key=lambda i: (v[i], i))[:k])
    return len(top(p) & top(m))


def load_runs(paths):
    """Passing runs as dicts with id, family, shape_kind, shape, measured_us; and a count of the others."""
    runs, excluded = {}, []
    for path in paths:
        d = json.load(open(path))
        schema = d.get("schema", "")
        if schema.startswith("cake-cost-accuracy/"):
            for r in d.get("runs", []):
                if r.get("kind", "corpus") != "corpus":
                    continue
                if r.get("verdict") == "pass" and r.get("measured_us", 0) > 0:
                    runs[(r["id"], r["shape_kind"])] = r
                else:
                    excluded.append(f"{r['id']} @ {r['shape_kind']}: {r.get('verdict')} {r.get('detail', '')}".strip())
        elif schema.startswith("cake-corpus-results/") or "results" in d:
            for x in d["results"]:
                t = (x.get("observed") or {}).get("time_us")
                if x.get("tier", "gpu") != "gpu":
                    continue
                if x.get("status") == "pass" and t:
                    runs[(x["id"], "gpu-tier")] = {"id": x["id"], "family": x["id"].split("/")[0], "shape_kind": "gpu-tier", "shape": None, "measured_us": t}
                else:
                    excluded.append(f"{x['id']} @ gpu-tier: {x.get('status')}")
        else:
            fail(f"{path}: neither a cake-cost-accuracy nor a corpus results file")
    return list(runs.values()), excluded


class Predictor:
    def __init__(self, cake, calibration):
        self.cake, self.calibration, self.cases, self.sources = cake, calibration, {}, {}
        self.tmp = tempfile.mkdtemp(prefix="cost-accuracy-")

    def case(self, cid):
        """The case's manifest and program (`cake corpus show --message-format json`)."""
        if cid not in self.cases:
            p = subprocess.run([self.cake, "corpus", "show", cid, "--message-format", "json"], capture_output=True, text=True)
            if p.returncode != 0:
                raise LookupError(f"`cake corpus show {cid}` failed: {(p.stderr or p.stdout).strip()[:200]}")
            self.cases[cid] = json.loads(p.stdout)
        return self.cases[cid]

    def gpu_tier_shape(self, cid):
        return self.case(cid)["manifest"]["workload"]["shapes"][-1]

    def predict(self, cid, shape):
        """(predicted µs, bottleneck) or raises LookupError with the reason."""
        if cid not in self.sources:
            path = os.path.join(self.tmp, cid.replace("/", "__") + ".cake")
            with open(path, "w") as f:
                f.write(self.case(cid)["source"])
            self.sources[cid] = path
        cmd = [self.cake, "cost", self.sources[cid], "--shape", shape_text(shape), "--message-format", "json"]
        if self.calibration:
            cmd += ["--calibration", self.calibration]
        p = subprocess.run(cmd, capture_output=True, text=True)
        for line in p.stdout.splitlines():
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "predicted_ms" in d:
                return d["predicted_ms"] * 1e3, d.get("bottleneck", "")
            if d.get("code"):
                raise LookupError(f"{d['code']} {d.get('message', '')}")
        raise LookupError(f"`cake cost` exited {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def table(title, rows, families):
    """Print one shape's table; returns {family or 'overall': (n, spearman, mape, median ratio, hits or None)}."""
    out = {}
    print(f"== {title}")
    print(f"  {'family':<22} {'n':>4} {'spearman':>9} {'mape':>8} {'pred/meas median':>17}  top-{TOP_K} recall")
    groups = [(f, [r for r in rows if r["family"] == f]) for f in families] + [("overall", rows)]
    for name, rs in groups:
        if not rs:
            continue
        p, m = [r["predicted_us"] for r in rs], [r["measured_us"] for r in rs]
        sp, mp, med = spearman(p, m), mape(p, m), statistics.median(a / b for a, b in zip(p, m))
        hits = top_k_hits(p, m, TOP_K) if name != "overall" and len(rs) >= TOP_K_MIN_CASES else None
        out[name] = (len(rs), sp, mp, med, hits)
        print(f"  {name:<22} {len(rs):>4} {fmt(sp, '9.3f', '        -')} {mp:>7.1f}% {med:>17.3f}  {'-' if hits is None else f'{hits}/{TOP_K}'}")
    return out


def main():
    args = sys.argv[1:]
    opts = {}
    for flag in ("--svg", "--calibration", "--predictions", "--cases"):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                fail(f"`{flag}` needs a file")
            opts[flag] = args[i + 1]
            del args[i:i + 2]
    paths = [a for a in args if a.endswith(".json")]
    wanted = set(a for a in args if not a.endswith(".json"))
    if not paths:
        # The comparison of benchmarks/RESULTS.md (2026-11-30): the families that got the gpu tier that day.
        paths = ["corpus/results/gpu-h200.json"]
        wanted = wanted or DEFAULT_FAMILIES
    runs, excluded = load_runs(paths)
    runs = [r for r in runs if not wanted or r["family"] in wanted]
    given = {}
    if "--predictions" in opts:
        for x in json.load(open(opts["--predictions"])):
            given[(x["id"], x["shape_kind"])] = x["predicted_us"]
    predictor = None
    rows, unpredicted = [], []
    for r in sorted(runs, key=lambda r: (r["family"], r["id"], r["shape_kind"])):
        try:
            if given:
                if (r["id"], r["shape_kind"]) not in given:
                    raise LookupError("not in the --predictions file")
                pred, bottleneck = given[(r["id"], r["shape_kind"])], ""
            else:
                predictor = predictor or Predictor(find_cake(), opts.get("--calibration"))
                shape = r["shape"] or predictor.gpu_tier_shape(r["id"])
                r = dict(r, shape=shape)
                pred, bottleneck = predictor.predict(r["id"], shape)
        except LookupError as e:
            unpredicted.append(f"{r['id']} @ {r['shape_kind']}: {e}")
            continue
        rows.append(dict(r, predicted_us=pred, bottleneck=bottleneck))
    if not rows:
        fail("no passing run with a prediction" + (f" (e.g. {unpredicted[0]})" if unpredicted else ""))
    families = sorted(set(r["family"] for r in rows))
    cal = opts.get("--calibration", "--predictions file" if given else "built-in")
    print(f"cost model vs measured: {len(rows)} run(s), {len(families)} families; calibration: {cal}")
    for kind in SHAPE_KINDS:
        rs = [r for r in rows if r["shape_kind"] == kind]
        if rs:
            table(f"shape {kind}", rs, families)
    if len(set(r["shape_kind"] for r in rows)) > 1:
        table("both shapes", rows, families)
    if excluded:
        print(f"left out, oracle did not pass ({len(excluded)}): " + "; ".join(excluded[:8]) + (" ..." if len(excluded) > 8 else ""))
    if unpredicted:
        print(f"left out, no prediction ({len(unpredicted)}): " + "; ".join(unpredicted[:8]) + (" ..." if len(unpredicted) > 8 else ""))
    if "--cases" in opts:
        import math
        with open(opts["--cases"], "w") as f:
            f.write("# family\tid\tshape kind\tshape\tmeasured us\tpredicted us\tpredicted/measured\tbottleneck\n")
            for r in sorted(rows, key=lambda r: -abs(math.log(r["predicted_us"] / r["measured_us"]))):
                f.write(f"{r['family']}\t{r['id']}\t{r['shape_kind']}\t{shape_text(r['shape'] or {})}\t{r['measured_us']:.2f}\t{r['predicted_us']:.2f}\t{r['predicted_us'] / r['measured_us']:.3f}\t{r['bottleneck']}\n")
    if "--svg" in opts:
        svg = opts["--svg"]
        plot = os.environ.get("CAKE_PLOT_BIN") or os.path.join(os.path.dirname(find_cake()), "cake-plot")
        if not os.path.exists(plot):
            fail(f"no {plot} to draw {svg}\n  = help: run `cargo build -p cake-plot` with the same profile as `cake`, or set CAKE_PLOT_BIN")
        with open(svg + ".tsv", "w") as f:
            f.write("# family\tmeasured us\tpredicted us (both shapes: gpu-tier and headline)\n")
            for r in rows:
                f.write(f"{r['family']}\t{r['measured_us']}\t{r['predicted_us']}\n")
        p, m = [r["predicted_us"] for r in rows], [r["measured_us"] for r in rows]
        title = f"cost model vs measured: n={len(rows)}, Spearman {fmt(spearman(p, m), '.3f')}, MAPE {mape(p, m):.1f}%"
        subprocess.run([plot, "scatter", svg + ".tsv", "--log", "-o", svg, "--title", title, "--x-label", "measured us", "--y-label", "predicted us"], check=True)


if __name__ == "__main__":
    main()
