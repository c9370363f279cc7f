#!/usr/bin/env python3
"""Turn recorded H200 timings (scripts/device-cost-accuracy.sh output, schema cake-cost-accuracy/1)
into a calibration run (schema cake.calibration-run/1) that `cake-evolve-compiler calibrate
--from-saved` fits, so a term whose probe was timed as an `[[unfitted]]` entry before the term
existed can be fitted from those records without a new GPU run.

    python3 scripts/accuracy-to-calibration-run.py RECORDS.json [MORE.json ...] -o RUN.json [--target sm_90a]
                                                   [--bench NAME ...]

RECORDS.json may also be a saved suite run (schema cake.calibration-run/1, `calibrate
--save-measurements`, e.g. a subset of the suite timed in one device call): its runs of the benches
fitted here are taken as they are, beside the accuracy rows of the other files.

- A `probe` row becomes a bench measurement of every `[[bench]]` of the target's suite that lists
  its program at that shape (the program text is read from the checkout, as the suite would run it).
  Probe rows no bench lists are left out (their term does not exist yet); with --bench, only
  those benches take measurements (the others keep their fitted values).
- A `corpus` row of a family that one of the suite's `[[accuracy]]` sets names becomes an accuracy
  measurement (the program from `cake corpus show`; $CAKE_BIN or target/release/cake): the fit is
  judged on it and never uses it.
Only rows whose oracle passed are taken. Prints what it took per bench and what it left out.
"""
import json, os, subprocess, sys, tomllib

SCHEMA_IN = "cake-cost-accuracy/"
SCHEMA_OUT = "cake.calibration-run/1"


def fail(msg):
    sys.exit(f"error: {msg}")


def shape_key(d):
    return tuple(sorted((k, int(v)) for k, v in d.items()))


def main():
    args = sys.argv[1:]
    out, target, inputs, only = None, "sm_90a", [], set()
    while args:
        a = args.pop(0)
        if a == "-o" and args:
            out = args.pop(0)
        elif a == "--target" and args:
            target = args.pop(0)
        elif a == "--bench" and args:
            only.add(args.pop(0))
        elif a.startswith("-"):
            fail(f"unknown option {a}\n  = help: {__doc__.strip().splitlines()[4].strip()}")
        else:
            inputs.append(a)
    if not out or not inputs:
        fail("give the records and -o RUN.json\n  = help: " + __doc__.strip().splitlines()[4].strip())
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    suite_dir = os.path.join(root, "calibration", "microbench", target)
    try:
        with open(os.path.join(suite_dir, "suite.toml"), "rb") as f:
            suite = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        fail(f"cannot read the {target} suite: {e}")
    # (program path as the records name it, shape) -> benches that run it there.
    benches = {}
    for b in suite.get("bench", []):
        if only and b["name"] not in only:
            continue
        for p in b["programs"]:
            rel = os.path.join("calibration", "microbench", target, p)
            for s in b["shapes"]:
                benches.setdefault((rel, shape_key(s)), []).append(b["name"])
    families = {f for a in suite.get("accuracy", []) for f in a["families"]}
    cake = os.environ.get("CAKE_BIN") or os.path.join(root, "target", "release", "cake")

    fitted = {b["name"] for b in suite.get("bench", []) if not only or b["name"] in only}
    rows, gpu, created, saved_ms = [], set(), 0, []
    for path in inputs:
        try:
            d = json.load(open(path))
        except (OSError, json.JSONDecodeError) as e:
            fail(f"{path}: {e}")
        schema = str(d.get("schema", ""))
        if d.get("target") != target or not (schema.startswith(SCHEMA_IN) or schema == SCHEMA_OUT):
            fail(f"{path}: neither a {SCHEMA_IN}* record nor a {SCHEMA_OUT} of target {target}")
        created = max(created, int(d.get("created_unix", 0)))
        if schema == SCHEMA_OUT:
            # A saved suite run (calibrate --save-measurements): its runs of the benches fitted here.
            took = [m for m in d.get("suite", []) if m.get("bench") in fitted]
            saved_ms += took
            if took:
                gpu.add(f"{', '.join(sorted({m['bench'] for m in took}))}: {d.get('gpu', '')}")
            continue
        gpu.add(d.get("gpu", ""))
        rows += d.get("runs", [])
    suite_ms, accuracy, left, sources = list(saved_ms), [], [], {}
    for r in rows:
        if r.get("verdict") != "pass" or not isinstance(r.get("measured_us"), (int, float)):
            continue
        dims = {k: int(v) for k, v in r["shape"].items()}
        label = ",".join(f"{k}={v}" for k, v in sorted(dims.items()))
        if r.get("kind") == "probe":
            names = benches.get((r["id"], shape_key(dims)), [])
            if not names:
                left.append(f"probe {r['id']} @ {label}: no [[bench]] runs it there")
                continue
            try:
                program = open(os.path.join(root, r["id"])).read()
            except OSError as e:
                fail(f"{r['id']}: {e}")
            for b in names:
                suite_ms.append({"bench": b, "name": f"{b}/{os.path.basename(r['id'])} @ {label}", "program": program, "dims": dims, "measured_ms": r["measured_us"] / 1000.0})
        elif r.get("kind") == "corpus" and r.get("family") in families:
            cid = r["id"]
            if cid not in sources:
                p = subprocess.run([cake, "corpus", "show", cid], capture_output=True, text=True)
                if p.returncode != 0:
                    fail(f"`{cake} corpus show {cid}` failed: {(p.stderr or p.stdout).strip()[:200]}")
                sources[cid] = p.stdout
            accuracy.append({"name": f"{cid} @ {label}", "program": sources[cid], "dims": dims, "measured_ms": r["measured_us"] / 1000.0})
    if not suite_ms:
        fail("no record is a run of a [[bench]] program at a bench shape: nothing to fit")
    run = {"schema": SCHEMA_OUT, "target": target, "gpu": " / ".join(sorted(g for g in gpu if g)), "created_unix": created, "suite": suite_ms, "accuracy": accuracy}
    with open(out, "w") as f:
        f.write(json.dumps(run, indent=2) + "\n")
    per = {}
    for m in suite_ms:
        per[m["bench"]] = per.get(m["bench"], 0) + 1
    print(f"{out}: " + ", ".join(f"bench {b}: {n} run(s)" for b, n in sorted(per.items())) + f"; accuracy: {len(accuracy)} corpus run(s)")
    for line in left:
        print(f"  left out: {line}")


if __name__ == "__main__":
    main()
