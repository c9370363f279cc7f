#!/usr/bin/env python3
"""The measuring half of the cost-accuracy report (issue 17), run by scripts/device-cost-accuracy.sh on
the GPU machine: every gpu-tier corpus case of TARGET (verdict accept) timed with `cake bench` at two
shapes, each output checked by the case's own oracle:

  gpu-tier  the workload's last `shapes` entry (the shape the corpus gpu tier times)
  headline  the workload's `headline` (a realistic large shape; per family in corpus/*/family.toml)

and then the `[[unfitted]]` probes of calibration/microbench/TARGET/suite.toml at their shapes (their
terms are not in the cost model yet, so `cake-evolve-compiler calibrate` skips them; the `[[bench]]`
programs are left to `calibrate`, which times and fits them itself).

    python3 scripts/cost-accuracy-bench.py run  -o OUT.json [--resume FILE ...]
    python3 scripts/cost-accuracy-bench.py merge A.json B.json ... -o OUT.json
    python3 scripts/cost-accuracy-bench.py plan DIR     # no GPU: every run's program and workload, as JSON

`run` writes OUT.json (schema cake-cost-accuracy/1) after every run, so a killed call keeps what it
measured; with --resume (and OUT.json itself, when it exists) it skips every run those files hold.
Environment: CAKE_BIN (required), TARGET (sm_90a), SHARD (i/n, 1-based: a stable hash of the case id,
as `cake corpus gate --shard`), DEADLINE_UNIX (stop starting runs after it), PER_RUN_S (cap of one
`cake bench`, default 120), REPEATS (timed launches, default: `cake bench`'s 20), CASES (only case
ids starting with one of these comma-separated prefixes), PROBES (0: leave the microbenchmark probes
out), RECORDS_DIR (keep every run record and its program there, for `cake-evolve-compiler import`). Ids and paths in the JSON are relative to the checkout. Exit: 0 done (some runs may have
failed their oracle: the JSON says which), 1 an error, 3 no GPU (nothing measured, nothing written).
Python 3.8+; the suite's TOML through tomllib, tomli or pip's vendored tomli (the device has 3.12).
"""
import hashlib, json, os, shutil, subprocess, sys, tempfile, time

SCHEMA = "cake-cost-accuracy/1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def toml_loads(text):
    try:
        import tomllib as t
    except ImportError:
        try:
            import tomli as t
        except ImportError:
            try:
                from pip._vendor import tomli as t
            except ImportError:
                sys.exit("error: no TOML reader in this python3 (tomllib, tomli or pip's vendored tomli)\n  = help: use Python 3.11+, or `pip install tomli`")
    return t.loads(text)


def toml_value(v):
    """A TOML value, tables inline: enough for a workload table (strings, numbers, booleans, arrays, tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise ValueError(f"cannot write {v!r} as TOML")


def toml_key(k):
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json.dumps(k)


def shape_text(s):
    return ",".join(f"{k}={v}" for k, v in s.items())


def shard_of(case_id, n):
    """0-based shard of a case id: a stable hash, so every machine splits the same way."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % n


def run_key(r):
    return (r.get("kind", "corpus"), r["id"], r["shape_kind"], shape_text(r["shape"]))


def load_runs(paths):
    runs = {}
    for p in paths:
        if not os.path.exists(p):
            continue
        d = json.load(open(p))
        if d.get("schema") != SCHEMA:
            sys.exit(f"error: {p} is not a {SCHEMA} file (schema {d.get('schema')!r})")
        for r in d.get("runs", []):
            runs[run_key(r)] = r
    return runs


class Cake:
    def __init__(self, exe):
        self.exe = exe

    def out(self, *args):
        p = subprocess.run([self.exe, *args], capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            raise RuntimeError(f"`cake {' '.join(args)}` exited {p.returncode}: {p.stderr.strip()[:300]}")
        return p.stdout


def corpus_plan(cake, target, prefixes):
    """(id, family, program text, workload table, [(shape_kind, shape)]) of every gpu-tier case of target."""
    plan = []
    for c in json.loads(cake.out("corpus", "list", "--cases", "--message-format", "json"))["cases"]:
        cid = c["id"]
        if c["target"] != target or c["verdict"] != "accept" or "gpu" not in c["tiers"]:
            continue
        if prefixes and not any(cid.startswith(p) for p in prefixes):
            continue
        shown = json.loads(cake.out("corpus", "show", cid, "--message-format", "json"))
        w = shown["manifest"].get("workload")
        if not w or not w.get("shapes") or not w.get("headline"):
            raise RuntimeError(f"{cid}: the case's [workload] needs `shapes` and `headline`")
        plan.append((cid, c["family"], shown["source"], w, [("gpu-tier", w["shapes"][-1]), ("headline", w["headline"])]))
    return plan


def probe_plan(target):
    """(bench name, program path, workload path, shapes, repeats) of the suite's [[unfitted]] probes."""
    rel = f"calibration/microbench/{target}/suite.toml"
    path = os.path.join(ROOT, rel)
    if not os.path.exists(path):
        return []
    suite = toml_loads(open(path).read())
    base = os.path.dirname(rel)
    out = []
    for b in suite.get("unfitted", []):
        for prog in b["programs"]:
            wl = b.get("workload") or prog[: -len(".cake")] + ".workload.toml"
            out.append((b["name"], f"{base}/{prog}", f"{base}/{wl}", b["shapes"], b.get("repeats")))
    return out


def read_record(evdir):
    runs = os.path.join(evdir, "runs")
    files = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
    if len(files) != 1:
        return None
    return json.load(open(os.path.join(runs, files[0])))


def bench_one(cake, prog, workload, shape, repeats, timeout_s, evdir):
    """One `cake bench` at one shape: (row fields, gpu name, exit code)."""
    args = [cake.exe, "bench", prog, "--workload", workload, "--shape", shape_text(shape), "--baseline", "none",
            "--evidence", evdir, "--timeout", str(int(max(5, timeout_s))), "--max-timeouts", "1"]
    if repeats:
        args += ["--repeats", str(repeats)]
    t0 = time.time()
    try:
        # `cake bench --timeout` bounds the run in its child; this bounds the build and the host work around it.
        p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        return {"wall_s": round(time.time() - t0, 2), "verdict": "timeout", "detail": f"cake bench did not finish in {timeout_s + 60:.0f} s"}, None, None
    wall = round(time.time() - t0, 2)
    rec = read_record(evdir)
    row = {"wall_s": wall}
    if rec is None:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        row.update(verdict="error", detail=f"cake bench exited {p.returncode} without a run record: {last[:300]}")
        return row, None, p.returncode
    verdict = str(rec.get("verdict", "")).lower()
    t = rec.get("times_ms") or {}
    row["verdict"] = verdict
    if t.get("median_ms"):
        row.update(measured_us=t["median_ms"] * 1e3, min_us=t.get("min_ms", 0) * 1e3, p90_us=t.get("p90_ms", 0) * 1e3)
    err = rec.get("error")
    if err:
        row["detail"] = f"{err.get('class', '')}: {str(err.get('message', ''))[:300]}"
    gpu = (rec.get("gpu") or {}).get("name")
    return row, gpu, p.returncode


def keep_record(evdir, prog, row):
    """With RECORDS_DIR set: keep the run's record and its program there (`<case>@<shape>.json`,
    `<case>.cake`), for `cake-evolve-compiler import --kind run RECORD --program PROGRAM`."""
    keep = os.environ.get("RECORDS_DIR")
    runs = os.path.join(evdir, "runs")
    if not keep or not os.path.isdir(runs):
        return
    os.makedirs(keep, exist_ok=True)
    stem = row["id"].replace("/", "__")
    label = "_".join(f"{k}{v}" for k, v in sorted(row["shape"].items()))
    # The record names the program and workload where this run wrote them (a temporary folder):
    # keep the file names only, so kept records hold no machine's paths.
    work = os.path.dirname(os.path.abspath(prog)) + os.sep
    for i, f in enumerate(sorted(os.listdir(runs))):
        with open(os.path.join(runs, f)) as src, open(os.path.join(keep, f"{stem}@{label}{'-' + str(i) if i else ''}.json"), "w") as dst:
            dst.write(src.read().replace(work, ""))
    if not os.path.exists(os.path.join(keep, stem + ".cake")):
        shutil.copyfile(prog, os.path.join(keep, stem + ".cake"))


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def build_jobs(cake, target, prefixes, si, sn, repeats, work):
    """(row, program, workload, repeats) of every run of shard si of sn; corpus programs and workloads written to work."""
    jobs = []
    per_family = {}
    for cid, fam, src, w, shapes in corpus_plan(cake, target, prefixes):
        if shard_of(cid, sn) != si:
            continue
        stem = cid.replace("/", "__")
        prog, wl = os.path.join(work, stem + ".cake"), os.path.join(work, stem + ".workload.toml")
        with open(prog, "w") as f:
            f.write(src)
        with open(wl, "w") as f:
            f.write("".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in w.items()))
        per_family.setdefault(fam, []).append([({"kind": "corpus", "id": cid, "family": fam, "shape_kind": kind, "shape": shape}, prog, wl, repeats) for kind, shape in shapes])
    # The probes first (few, short), then the cases round-robin over the families, both shapes
    # of a case together: a call cut short by TIME_CAP_S still covers every family (resume takes
    # the rest).
    if os.environ.get("PROBES", "1") != "0":
        for bench, prog, wl, shapes, rep in probe_plan(target):
            if shard_of(prog, sn) != si:
                continue
            for shape in shapes:
                jobs.append(({"kind": "probe", "id": prog, "family": f"probe:{bench}", "shape_kind": "probe", "shape": shape},
                             os.path.join(ROOT, prog), os.path.join(ROOT, wl), str(rep) if rep else repeats))
    for k in range(max((len(v) for v in per_family.values()), default=0)):
        for fam in sorted(per_family):
            if k < len(per_family[fam]):
                jobs.extend(per_family[fam][k])
    return jobs


def cmd_plan(argv):
    """Write every run's program and workload under DIR and print the runs as JSON (no GPU needed)."""
    if len(argv) != 1:
        sys.exit("usage: cost-accuracy-bench.py plan DIR")
    exe = os.environ.get("CAKE_BIN")
    if not exe or not os.path.exists(exe):
        sys.exit(f"error: no `cake` binary at CAKE_BIN={exe!r}")
    os.makedirs(argv[0], exist_ok=True)
    prefixes = [p for p in os.environ.get("CASES", "").split(",") if p]
    jobs = build_jobs(Cake(os.path.abspath(exe)), os.environ.get("TARGET", "sm_90a"), prefixes, 0, 1, None, os.path.abspath(argv[0]))
    json.dump([dict(row, program=prog, workload=wl) for row, prog, wl, _ in jobs], sys.stdout, indent=1)
    print()
    return 0


def cmd_run(argv):
    out, resume = None, []
    it = iter(argv)
    for a in it:
        if a in ("-o", "--out"):
            out = next(it, None)
        elif a == "--resume":
            resume.append(next(it, ""))
        else:
            sys.exit(f"error: unexpected argument `{a}`\n  = help: run -o OUT.json [--resume FILE ...]")
    if not out:
        sys.exit("error: `run` needs -o OUT.json")
    exe = os.environ.get("CAKE_BIN")
    if not exe or not os.path.exists(exe):
        sys.exit(f"error: no `cake` binary at CAKE_BIN={exe!r}\n  = help: build it here (cargo build --release -p cake) and carry it")
    cake = Cake(os.path.abspath(exe))
    target = os.environ.get("TARGET", "sm_90a")
    si, sn = 0, 1
    if os.environ.get("SHARD"):
        try:
            a, b = os.environ["SHARD"].split("/")
            si, sn = int(a) - 1, int(b)
            assert 0 <= si < sn
        except (ValueError, AssertionError):
            sys.exit(f"error: SHARD={os.environ['SHARD']!r}\n  = help: SHARD=i/n with 1 <= i <= n, e.g. SHARD=2/4")
    deadline = float(os.environ.get("DEADLINE_UNIX") or time.time() + 420)
    per_run = float(os.environ.get("PER_RUN_S", "120"))
    repeats = os.environ.get("REPEATS")
    prefixes = [p for p in os.environ.get("CASES", "").split(",") if p]
    done = load_runs(resume + [out])
    doc = {"schema": SCHEMA, "target": target, "shard": f"{si + 1}/{sn}", "gpu": None, "created_unix": int(time.time()),
           "runs": sorted(done.values(), key=run_key), "not_run": []}
    work = tempfile.mkdtemp(prefix="cost-accuracy-")
    jobs = build_jobs(cake, target, prefixes, si, sn, repeats, work)
    todo = [j for j in jobs if run_key(j[0]) not in done]
    print(f"{len(jobs)} run(s) in shard {si + 1}/{sn}, {len(jobs) - len(todo)} already measured, {len(todo)} to go", flush=True)
    for n, (row, prog, wl, rep) in enumerate(todo):
        left = deadline - time.time()
        if left < 10:
            doc["not_run"] = [{"id": r["id"], "shape_kind": r["shape_kind"], "why": "time cap"} for r, *_ in todo[n:]]
            print(f"time cap: {len(todo) - n} run(s) not started (run again with --resume to finish)", flush=True)
            break
        evdir = os.path.join(work, "ev", f"{n}")
        fields, gpu, rc = bench_one(cake, prog, wl, row["shape"], rep, min(per_run, left), evdir)
        if rc == 3:
            print(f"SKIP: `cake bench` found no GPU ({fields.get('detail', '')}); nothing measured", flush=True)
            shutil.rmtree(work, ignore_errors=True)
            return 3
        row.update(fields)
        keep_record(evdir, prog, row)
        doc["gpu"] = doc["gpu"] or gpu
        done[run_key(row)] = row
        doc["runs"] = sorted(done.values(), key=run_key)
        write_json(out, doc)
        t = f"{row['measured_us']:.2f} us" if "measured_us" in row else "-"
        print(f"[{n + 1}/{len(todo)}] {row['id']} @ {row['shape_kind']} {shape_text(row['shape'])}: {row['verdict']} {t} ({row['wall_s']} s){' ' + row['detail'] if row.get('detail') else ''}", flush=True)
    write_json(out, doc)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def cmd_merge(argv):
    if "-o" not in argv or argv.index("-o") + 1 >= len(argv):
        sys.exit("error: `merge` needs -o OUT.json")
    i = argv.index("-o")
    out, inputs = argv[i + 1], argv[:i] + argv[i + 2:]
    docs = [json.load(open(p)) for p in inputs]
    runs = load_runs(inputs)
    merged = {"schema": SCHEMA, "target": next((d.get("target") for d in docs), None), "shard": "merged",
              "gpu": next((d.get("gpu") for d in docs if d.get("gpu")), None), "created_unix": int(time.time()),
              "runs": sorted(runs.values(), key=run_key),
              "not_run": [x for d in docs for x in d.get("not_run", []) if (x.get("kind", "corpus"), x["id"], x["shape_kind"]) not in {k[:3] for k in runs}]}
    write_json(out, merged)
    print(f"{len(runs)} run(s) from {len(inputs)} file(s) -> {out}")
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "run":
        sys.exit(cmd_run(sys.argv[2:]))
    if cmd == "plan":
        sys.exit(cmd_plan(sys.argv[2:]))
    if cmd == "merge":
        sys.exit(cmd_merge(sys.argv[2:]))
    sys.exit("usage: cost-accuracy-bench.py run -o OUT.json [--resume FILE ...] | merge A.json ... -o OUT.json | plan DIR")
