#!/usr/bin/env python3
"""Turn the run records of scripts/device-calibration.sh into cost-model measurements.

usage: calibration-measurements.py UNPACKED_DIR OUT.json

UNPACKED_DIR holds `evidence/runs/*.json` (run records) and `cases/*.cake` (the programs that ran).
Every passing run becomes one measurement {name, program, dims, measured_ms}: the input of
`cake-evolve-compiler calibrate --target sm_90a --measurements OUT.json`. Runs that did not pass
the oracle are left out (a wrong kernel's time says nothing about the model).
"""
import glob
import json
import os
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, out = sys.argv[1], sys.argv[2]
    measurements, skipped = [], 0
    for path in sorted(glob.glob(os.path.join(root, "evidence", "runs", "*.json"))):
        with open(path) as f:
            rec = json.load(f)
        times = rec.get("times_ms") or {}
        if rec.get("verdict") != "pass" or not times.get("median_ms"):
            skipped += 1
            continue
        program = os.path.join(root, "cases", os.path.basename(rec["program"]["path"]))
        with open(program) as f:
            source = f.read()
        case = os.path.basename(program)[: -len(".cake")].replace("__", "/")
        shape = ",".join(f"{k}={v}" for k, v in sorted(rec["shape"].items()))
        measurements.append(
            {"name": f"{case} @ {shape}", "program": source, "dims": rec["shape"], "measured_ms": times["median_ms"]}
        )
    measurements.sort(key=lambda m: m["name"])
    with open(out, "w") as f:
        json.dump(measurements, f, indent=1)
    print(f"{len(measurements)} measurements written to {out} ({skipped} runs skipped: not passing or untimed)")
    return 0 if measurements else 1


if __name__ == "__main__":
    sys.exit(main())
