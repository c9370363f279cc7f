#!/usr/bin/env python3
"""Score the verifier on the held-out data-consistency benchmark (verify-benchmark/dataflow/).

    python3 scripts/dataflow-bench-score.py RUNS.jsonl [--racecheck RACE.jsonl]   # with GPU results
    python3 scripts/dataflow-bench-score.py --static-only                         # verifier only

RUNS.jsonl / RACE.jsonl are what scripts/device-dataflow-bench.sh writes ($OUT/dataflow-runs.jsonl,
$OUT/dataflow-racecheck.jsonl; the latter is found beside the former by default).

A bug FAILS ON THE GPU when any run of it (either seed, either shape) is a mismatch, a timeout
(hang) or a fault (an error while launching or running it), or racecheck reported a hazard.
Runs the toolchain refused (a lowering/ptxas refusal `build_L*`/`build_P*`, or the runtime refusing
a launch, `launch_spec`) are reported apart as REFUSED; runs with no GPU result (no GPU, NVRTC
missing, workload/shape errors, skipped for time) as NO RESULT.

The verifier CATCHES a bug when `cake check --message-format json` reports a finding of severity
`error`; AT THE LINE when one such finding's primary span starts on the manifest's edited line.
FALSE POSITIVES: error findings on the unedited base cases (`cake corpus show BASE`), and with
--corpus-fp on every accepted corpus case.

Binary: --cake PATH, else $CAKE_BIN, else target/release/cake.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "verify-benchmark", "dataflow")

INFRA = ("build_N", "driver_library", "io", "internal", "workload", "shape")
REFUSED = ("build_L", "build_P", "build_E", "build_V", "launch_spec")


def check(cake, path):
    p = subprocess.run([cake, "check", "--message-format", "json", path], capture_output=True, text=True)
    out = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out.append((d["code"], d["severity"], (d.get("primary") or {}).get("line")))
    if p.returncode not in (0, 1) or (p.returncode == 1 and not out):
        sys.exit(f"`{cake} check {path}` failed (rc {p.returncode}): {p.stderr.strip()[:400]}")
    return out


def classify_run(run, rc_verdict):
    """One run record summary -> wrong | hang | fault | refused | infra | pass."""
    v = run.get("verdict")
    if v == "pass":
        return "pass"
    if v == "mismatch":
        return "wrong"
    if v == "timeout":
        return "hang"
    if v == "skipped":
        return "infra"
    cls = run.get("error") or ""
    if cls.startswith(INFRA):
        return "infra"
    if cls.startswith(REFUSED):
        return "refused"
    return "fault"


def gpu_outcome(lines, race):
    """All invocations of one program (and its racecheck) -> (outcome, detail)."""
    kinds = collections.Counter()
    for ln in lines:
        if ln.get("verdict") in ("no-gpu", "budget") or ln.get("rc") is None:
            kinds["infra"] += 1
            continue
        if ln.get("verdict") == "timeout" and not ln.get("runs"):
            kinds["hang"] += 1  # the invocation itself was killed
            continue
        runs = ln.get("runs") or []
        if not runs:
            kinds["infra" if ln.get("rc") == 3 else "fault"] += 1
        for r in runs:
            kinds[classify_run(r, ln.get("verdict"))] += 1
    if race and race.get("hazards"):
        kinds["race"] += 1
    for k in ("wrong", "hang", "fault", "race"):
        if kinds[k]:
            return "fails", dict(kinds)
    if kinds["refused"]:
        return "refused", dict(kinds)
    if kinds["pass"] and not kinds["infra"]:
        return "passes", dict(kinds)
    if kinds["pass"]:
        return "passes-partial", dict(kinds)
    return "no-result", dict(kinds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="?", help="dataflow-runs.jsonl from scripts/device-dataflow-bench.sh")
    ap.add_argument("--racecheck", help="dataflow-racecheck.jsonl (default: beside RUNS)")
    ap.add_argument("--static-only", action="store_true", help="no GPU results: the verifier's catch rate over all bugs")
    ap.add_argument("--cake", default=os.environ.get("CAKE_BIN", os.path.join(ROOT, "target", "release", "cake")))
    ap.add_argument("--manifest", default=os.path.join(BENCH, "manifest.toml"))
    ap.add_argument("--corpus-fp", action="store_true", help="also check every accepted corpus case for false positives")
    ap.add_argument("--json", help="write the per-bug results here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print one line per bug")
    a = ap.parse_args()
    if not a.static_only and not a.runs:
        ap.error("give RUNS.jsonl, or --static-only")
    bugs = tomllib.load(open(a.manifest, "rb"))["bug"]
    bench_dir = os.path.dirname(os.path.abspath(a.manifest))

    runs = collections.defaultdict(list)
    race = {}
    if a.runs:
        for line in open(a.runs):
            if line.strip():
                d = json.loads(line)
                runs[d["file"]].append(d)
        rp = a.racecheck or os.path.join(os.path.dirname(os.path.abspath(a.runs)), "dataflow-racecheck.jsonl")
        if os.path.exists(rp):
            for line in open(rp):
                if line.strip():
                    d = json.loads(line)
                    if "file" in d:
                        race[d["file"]] = d

    rows = []
    for b in bugs:
        f = check(a.cake, os.path.join(bench_dir, b["file"]))
        errs = [x for x in f if x[1] == "error"]
        row = dict(file=b["file"], family=b["family"], cls=b["class"], line=b["line"], smem=b["smem"],
                   codes=[c for c, _, _ in errs], caught=bool(errs), at_line=any(l == b["line"] for _, _, l in errs),
                   lines=sorted({l for _, _, l in errs if l is not None}))
        if a.runs:
            row["gpu"], row["gpu_detail"] = gpu_outcome(runs.get(b["file"], []), race.get(b["file"]))
            if b["file"] not in runs:
                row["gpu"] = "no-result"
        rows.append(row)

    # false positives: the unedited base cases (and, on request, every accepted corpus case)
    cases = sorted({b["base"] for b in bugs})
    if a.corpus_fp:
        p = subprocess.run([a.cake, "corpus", "list", "--cases"], capture_output=True, text=True, check=True)
        cases = sorted(set(cases) | {l.split()[0] for l in p.stdout.splitlines()
                                     if l.strip() and "/" in l.split()[0] and not l.startswith("verifier-negative/")})
    fps = []
    with tempfile.TemporaryDirectory() as td:
        for c in cases:
            p = subprocess.run([a.cake, "corpus", "show", c], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"cake corpus show {c}: {p.stderr.strip()}")
            path = os.path.join(td, c.replace("/", "__") + ".cake")
            open(path, "w").write(p.stdout)
            e = [x for x in check(a.cake, path) if x[1] == "error"]
            if e:
                fps.append((c, e))

    if a.verbose:
        for r in rows:
            g = f" {r['gpu']:14}" if a.runs else ""
            print(f"{r['file']:58} {r['cls']:15}{g} {'caught' if r['caught'] else '-':6} "
                  f"{'@line' if r['at_line'] else '':5} {','.join(r['codes'])} {r['lines'] if r['caught'] else ''}")
        print()

    n = len(rows)
    fams = len({r["family"] for r in rows})
    caught = sum(r["caught"] for r in rows)
    at = sum(r["at_line"] for r in rows)
    print(f"benchmark: {n} one-line bugs over {fams} families ({a.manifest})")
    print(f"static: the verifier rejects {caught}/{n} ({100 * caught / n:.0f}%), at the edited line {at}/{n} ({100 * at / n:.0f}%)")
    print(f"false positives: {len(fps)} of {len(cases)} unedited {'corpus' if a.corpus_fp else 'base'} cases")
    for c, e in fps:
        print(f"  FP {c}: {', '.join(f'{x[0]}@{x[2]}' for x in e)}")

    if a.runs:
        out = collections.Counter(r["gpu"] for r in rows)
        print("gpu outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(out.items())))
        fail = [r for r in rows if r["gpu"] == "fails"]
        fc = sum(r["caught"] for r in fail)
        fa = sum(r["at_line"] for r in fail)
        nf = max(len(fail), 1)
        print(f"fail on the GPU: {len(fail)}/{n}; the verifier rejects {fc}/{len(fail)} ({100 * fc / nf:.0f}%, target >= 90%), "
              f"at the edited line {fa}/{len(fail)} ({100 * fa / nf:.0f}%, target >= 80%)")
        missed = [r["file"] for r in fail if not r["caught"]]
        if missed:
            print("  failing and not caught: " + " ".join(missed))
        ref = [r["file"] for r in rows if r["gpu"] == "refused"]
        if ref:
            print("  refused by the toolchain (not counted as GPU failures): " + " ".join(ref))
        passed_caught = [r["file"] for r in rows if r["gpu"] == "passes" and r["caught"]]
        if passed_caught:
            print("  pass on the GPU but rejected (bugs with no observed effect at these shapes): " + " ".join(passed_caught))

    print()
    hdr = f"{'class':16} {'bugs':>4} {'caught':>7} {'@line':>6}"
    if a.runs:
        hdr += f" {'gpu-fail':>8} {'fail&caught':>11} {'fail&@line':>10}"
    print(hdr)
    for cls in sorted({r["cls"] for r in rows}) + ["all"]:
        rs = rows if cls == "all" else [r for r in rows if r["cls"] == cls]
        line = f"{cls:16} {len(rs):4} {sum(r['caught'] for r in rs):7} {sum(r['at_line'] for r in rs):6}"
        if a.runs:
            fr = [r for r in rs if r["gpu"] == "fails"]
            line += f" {len(fr):8} {sum(r['caught'] for r in fr):11} {sum(r['at_line'] for r in fr):10}"
        print(line)
    if a.json:
        json.dump({"bugs": rows, "false_positives": [{"case": c, "findings": e} for c, e in fps]},
                  open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
