#!/usr/bin/env python3
"""Regenerate the seeded failure benchmark's ablation classes (evolution/benchmark/, issue 12).

Every program is ONE realistic edit of a corpus case: the case's program is taken from
`cake corpus show FAMILY/CASE`, each edited line (numbered in that program) must contain `old`
exactly once, and `old` is replaced by `new`. An edit is one change; a stage count, which a
pipeline and each of its buffers declare, is changed on all of those lines together (they must
agree, V401). A header of HEADER_LINES comment lines is put in front, so an edited line of the
saved file is `line + HEADER_LINES`. The workload is the case's effective `[workload]`
(`cake corpus show --manifest`, family defaults merged with the instance's overrides).

    python3 evolution/benchmark/make_classes.py [--cake PATH] [--build]

writes <class>/{train,heldout,probe}/<family>--<slug>.cake + .workload.toml and manifest.toml,
and FAILS (exit 1) when a program has an E-code (it must type-check), when a train/heldout
program's full-verifier error codes are not the class's codes (exactly them, or for a class with
`subset` a non-empty subset of them), or when a probe gets any verifier error. With --build it
also builds every train/heldout program with `cake build --unsafe-skip-verify` (toolchain from
scripts/common.sh) and fails unless the ptxas classes (gpu = false) fail to compile and every
other class builds, so that its failure shows on the GPU; the results go into manifest.toml.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER_LINES = 6

# name: (ablated rules, subset?, gpu?, what). `subset`: a program may be rejected by any
# non-empty subset of the codes (tile-coverage's three rules are one bug class: one tile-space
# bug can leave rows unwritten and make two tiles write others). `gpu`: the failure is only
# observable on the GPU (launch/encode error, wrong answer); false: ptxas rejects the build.
CLASSES = {
    "smem-capacity": (["V201"], False, True,
                      "shared memory over the per-block limit (more stages, bigger tiles): the launch fails"),
    "block-threads": (["V202"], False, True,
                      "more than 1024 threads per block (a role placed at warpgroup 8, a warp range written as warpgroups): the launch fails"),
    "setmaxnreg-range": (["V204"], False, False,
                         "a role's setmaxnreg budget outside 24..256: ptxas rejects the immediate"),
    "setmaxnreg-multiple": (["V205"], False, False,
                            "a role's setmaxnreg budget not a multiple of 8: ptxas rejects the immediate"),
    "tma-box-range": (["V211"], False, True,
                      "a TMA box extent over 256 (or 0): cuTensorMapEncodeTiled refuses the descriptor"),
    "tma-inner-box-16b": (["V212"], False, True,
                          "a TMA box whose innermost extent is not a multiple of 16 B: cuTensorMapEncodeTiled refuses the descriptor"),
    "operand-rows": (["V325"], False, True,
                     "a feeding read at other rows, batch, group or warp than the store it feeds: a wrong answer"),
    "tile-coverage": (["V320", "V321", "V323"], True, True,
                      "a multiple_of too weak for a tile, a tile space over part of the output, two writers of one element: a wrong answer"),
    "fills-overlap": (["V328"], False, True,
                      "sibling TMA fills of one stage on the same bytes (overlapping views, two boxes into one view): a wrong answer"),
}


def stages(lines, old, new):
    """One stage-count change applied to every line that declares it."""
    return [(l, old, new) for l in lines]


# (class, split, case, [(line, old, new), ...], slug, what, shapes-override)
PROGRAMS = [
    # ---------------- smem-capacity (V201)
    ("smem-capacity", "train", "gemm-sm90-ws/bf16-128x256-s4", stages([17, 18, 24], "stages 4", "stages 5"),
     "five-stages", "a fifth 48 KB stage of the 128x256 tiles: 246 KB of shared memory", None),
    ("smem-capacity", "train", "kmeans-assign/d256-128x128-s2-p", stages([21, 22, 28], "stages 2", "stages 3"),
     "three-centroid-stages", "a third 64 KB centroid stage next to the 64 KB point tile", None),
    ("smem-capacity", "train", "tma-copy/sm_90a-bf16-256x64-s3-sw128", stages([15, 20], "stages 3", "stages 8"),
     "eight-stages", "an 8-stage ring of 32 KB boxes for more bytes in flight", None),
    ("smem-capacity", "train", "gemm-batched/bf16-128x256-s4-p", stages([18, 19, 24], "stages 4", "stages 6"),
     "six-stages", "six 48 KB stages of the 128x256 batched tiles", None),
    ("smem-capacity", "heldout", "attention-fwd/bf16-hd128-q128-s3-p", stages([24, 25, 34], "stages 3", "stages 6"),
     "six-kv-stages", "six K/V stages beside the Q and P tiles", None),
    ("smem-capacity", "heldout", "knn-topk/d256-128x128-s2-p", stages([24, 25, 31], "stages 2", "stages 3"),
     "three-database-stages", "a third 64 KB database stage next to the 64 KB query tile", None),
    ("smem-capacity", "heldout", "gemm-sm90-splitn/bf16-64x256-s5", stages([18, 19, 24], "stages 5", "stages 6"),
     "six-stages", "a sixth 40 KB stage of the 64x256 split-N tiles", None),
    ("smem-capacity", "heldout", "kmeans-update/128x256-s3-p", stages([22, 23, 28], "stages 3", "stages 5"),
     "five-stages", "five 48 KB stages of the one-hot GEMM", None),
    ("smem-capacity", "probe", "gemm-sm90-ws/bf16-128x128-s6", stages([17, 18, 24], "stages 6", "stages 7"),
     "seven-stages", "seven 32 KB stages: 230512 B, 1936 B under the limit", None),
    ("smem-capacity", "probe", "tma-copy/sm_90a-bf16-256x64-s3-sw128", stages([15, 20], "stages 3", "stages 7"),
     "seven-stages", "seven 32 KB boxes: 230512 B, 1936 B under the limit", None),
]


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def sh(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)


def toolchain_env():
    """The environment scripts/common.sh's cake_use_toolchain sets (NVRTC/ptxas for `cake build`)."""
    out = sh(["bash", "-c", ". scripts/common.sh && cake_use_toolchain >/dev/null && env -0"])
    if out.returncode != 0:
        sys.exit(f"cake_use_toolchain failed: {out.stderr}")
    return dict(kv.split("=", 1) for kv in out.stdout.split("\0") if "=" in kv)


def build(cake, path, env):
    """`cake build --unsafe-skip-verify`: ("pass", None) or ("fail", first error code and message)."""
    with tempfile.TemporaryDirectory() as d:
        r = sh([cake, "build", "--unsafe-skip-verify", "--message-format", "json", "-o", d, path], env=env)
    if r.returncode == 0:
        return "pass", None
    ds = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    errs = [x for x in ds if x.get("severity") == "error"]
    if not errs:
        return "fail", (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    return "fail", f"{errs[0]['code']}: {errs[0]['message'][:160]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cake", default=os.environ.get("CAKE_BIN", "target/debug/cake"))
    ap.add_argument("--build", action="store_true", help="also build every train/heldout program with the verifier bypassed")
    a = ap.parse_args()
    cake = os.path.abspath(os.path.join(ROOT, a.cake)) if not os.path.isabs(a.cake) else a.cake
    env = toolchain_env() if a.build else None
    for cls in CLASSES:
        shutil.rmtree(os.path.join(HERE, cls), ignore_errors=True)
    seen, entries, bad = set(), [], 0
    for cls, split, case, edits, slug, what, shapes in PROGRAMS:
        ablate, subset, gpu, _ = CLASSES[cls]
        family = case.split("/")[0]
        stem = f"{family}--{slug}"
        rel = f"{cls}/{split}/{stem}"
        assert rel not in seen, rel
        seen.add(rel)
        prog = sh([cake, "corpus", "show", case])
        if prog.returncode != 0:
            sys.exit(f"{case}: {prog.stderr}")
        lines = prog.stdout.split("\n")
        befores, afters = [], []
        for line, old, new in edits:
            before = lines[line - 1]
            if before.count(old) != 1:
                sys.exit(f"{rel}: line {line} of {case} does not contain {old!r} once: {before!r}")
            lines[line - 1] = before.replace(old, new)
            befores.append(before.strip())
            afters.append(lines[line - 1].strip())
        nums = ", ".join(str(l + HEADER_LINES) for l, _, _ in edits)
        base_nums = ", ".join(str(l) for l, _, _ in edits)
        header = [
            f"# seeded failure benchmark, class {cls} ({split}; ablates {', '.join(ablate)}): "
            + ("a LEGAL probe just inside the boundary" if split == "probe" else "one edit"),
            f"# base: {case}",
            f"# edit: line(s) {nums} (line(s) {base_nums} of the base case)",
            f"#   before: {' | '.join(befores)}",
            f"#   after:  {' | '.join(afters)}",
            f"# {what}",
        ]
        assert len(header) == HEADER_LINES
        os.makedirs(os.path.join(HERE, cls, split), exist_ok=True)
        path = os.path.join(HERE, rel + ".cake")
        with open(path, "w") as f:
            f.write("\n".join(header + lines))
        man = tomllib.loads(sh([cake, "corpus", "show", "--manifest", case]).stdout)
        wl = dict(man["workload"])
        if shapes is not None:
            wl["shapes"] = shapes
        with open(os.path.join(HERE, rel + ".workload.toml"), "w") as f:
            f.write(f"# Workload of {stem}.cake: the effective [workload] of {case}"
                    + (" with shapes allowed by the edited `multiple_of`" if shapes else "") + ".\n")
            for k, v in wl.items():
                f.write(f"{k} = {toml_value(v)}\n")
        chk = sh([cake, "check", "--message-format", "json", path])
        ds = [json.loads(l) for l in chk.stdout.splitlines() if l.startswith("{")]
        errors = sorted({d["code"] for d in ds if d.get("severity") == "error"})
        problem = None
        if any(c.startswith("E") for c in errors):
            problem = f"E-codes {errors}"
        elif split == "probe":
            if errors:
                problem = f"the probe is rejected: {errors}"
        elif not errors:
            problem = "the full verifier accepts it"
        elif subset and not set(errors) <= set(ablate):
            problem = f"codes {errors} are not a subset of {ablate}"
        elif not subset and errors != sorted(ablate):
            problem = f"codes {errors}, expected exactly {ablate}"
        built = None
        if a.build and split != "probe" and problem is None:
            built = build(cake, path, env)
            if gpu and built[0] != "pass":
                problem = f"does not build with the verifier bypassed ({built[1]}): its failure could not show on the GPU"
            if not gpu and built[0] == "pass":
                problem = "builds with the verifier bypassed, but the class is a compile failure"
        if problem:
            bad += 1
            print(f"FAIL {rel}: {problem}\n{chk.stdout}", file=sys.stderr)
        lines_saved = [l + HEADER_LINES for l, _, _ in edits]
        entries.append(dict(file=rel + ".cake", workload=rel + ".workload.toml", cls=cls, split=split, family=family, base=case,
                            lines=lines_saved, base_lines=[l for l, _, _ in edits], codes=errors, what=what, built=built))
        b = "" if built is None else (" build=pass" if built[0] == "pass" else f" build=fail({built[1].split(':')[0]})")
        print(f"{rel:75} {','.join(errors) or '-'}{b}")
    with open(os.path.join(HERE, "manifest.toml"), "w") as f:
        f.write("# The seeded failure benchmark's ablation programs (see README.md). One [[program]] per file:\n"
                "# `codes` are today's full-verifier error codes (none for a probe); `lines` the edited lines of\n"
                "# `file`; `build` the `cake build --unsafe-skip-verify` result. Generated by make_classes.py.\n")
        for e in entries:
            f.write(f"\n[[program]]\nfile = \"{e['file']}\"\nworkload = \"{e['workload']}\"\nclass = \"{e['cls']}\"\n"
                    f"split = \"{e['split']}\"\nfamily = \"{e['family']}\"\nbase = \"{e['base']}\"\nlines = {toml_value(e['lines'])}\n"
                    f"base_lines = {toml_value(e['base_lines'])}\ncodes = {toml_value(e['codes'])}\nwhat = {toml_value(e['what'])}\n")
            if e["built"] is not None:
                f.write(f"build = {toml_value(e['built'][0])}\n")
                if e["built"][1]:
                    f.write(f"build_error = {toml_value(e['built'][1])}\n")
    counts = {}
    for e in entries:
        counts.setdefault(e["cls"], {}).setdefault(e["split"], 0)
        counts[e["cls"]][e["split"]] += 1
    for cls in CLASSES:
        c = counts.get(cls, {})
        print(f"{cls:22} train {c.get('train', 0)}  heldout {c.get('heldout', 0)}  probe {c.get('probe', 0)}")
    print(f"{len(entries)} programs; {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
