#!/usr/bin/env python3
"""A Cake kernel against an out-of-process peer (a torch, Liger-Kernel or flashlib script of
benchmarks/), timed in interleaved rounds in one device call: Cake, peer, Cake, peer, ... (issue 18,
item 6, the statistic `cake bench --rounds` uses in process for cuBLAS).

    python3 benchmarks/interleave.py --rounds 3 --repeats 20 -o ratio.json \\
        --cake 'target/release/cake bench corpus-case.cake --shape R=16384,C=4096 --baseline none' \\
        --peer 'python3 benchmarks/torch_peer.py softmax --rows 16384 --cols 4096 --dtype bf16'

Each round runs the `--cake` command with `--repeats N --evidence DIR` added, and reads the run
record it writes (`DIR/runs/*.json`: exactly one, its oracle verdict `pass`, its L2-flushed median),
then the `--peer` command with `--repeats N` added, whose last output line is a JSON object with
`median_ms` (the peers check their own output against fp64 and exit 1 when it is wrong). The ratio
is the median of the peer's round medians over the median of Cake's: above 1, Cake is faster.
Prints one line per round and the ratio; with -o writes every round median and the commands.
Exit: 0 measured, 1 a run failed or a check did not pass, 2 bad arguments, 3 no GPU (either side
exited 3: nothing measured, nothing written).
"""
import argparse
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

NO_GPU = 3


class Failed(Exception):
    pass


class Skipped(Exception):
    pass


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == NO_GPU:
        raise Skipped(f"{what} exited 3 (no GPU): {(p.stderr or p.stdout).strip()[-300:]}")
    if p.returncode != 0:
        raise Failed(f"{what} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-600:]}")
    return p.stdout


def cake_round(cmd, repeats, evidence):
    run(cmd + ["--repeats", str(repeats), "--evidence", evidence], "the Cake command")
    records = sorted(glob.glob(os.path.join(evidence, "runs", "*.json")))
    if len(records) != 1:
        raise Failed(f"the Cake command wrote {len(records)} run records in {evidence}: give it one `--shape` and one `--dist`")
    try:
        rec = json.load(open(records[0]))
    except (OSError, json.JSONDecodeError) as e:
        raise Failed(f"{records[0]}: not a run record: {e}")
    if rec.get("verdict") != "pass":
        raise Failed(f"the Cake kernel's output did not pass its oracle (verdict {rec.get('verdict')!r}: {rec.get('error')})")
    median = (rec.get("times_ms") or {}).get("median_ms")
    if not isinstance(median, (int, float)) or median <= 0:
        raise Failed(f"{records[0]}: no median time")
    return float(median)


def peer_round(cmd, repeats):
    out = run(cmd + ["--repeats", str(repeats)], "the peer command")
    lines = [l for l in out.strip().splitlines() if l.strip()]
    try:
        median = json.loads(lines[-1])["median_ms"]
    except (IndexError, json.JSONDecodeError, KeyError, TypeError):
        raise Failed(f"the peer command's last line is not a JSON object with median_ms: {out.strip()[-300:]!r}")
    if not isinstance(median, (int, float)) or median <= 0:
        raise Failed(f"the peer's median_ms is {median!r}")
    return float(median)


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--cake", required=True, help="the `cake bench` command (quoted)")
    ap.add_argument("--peer", required=True, help="the peer script's command (quoted)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    if a.rounds < 3 or a.repeats < 20:
        ap.error("the statistic takes at least 3 rounds of at least 20 samples each (--rounds 3 --repeats 20)")
    cake, peer = shlex.split(a.cake), shlex.split(a.peer)
    kernel_ms, peer_ms = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="cake-interleave-") as tmp:
            for i in range(a.rounds):
                kernel_ms.append(cake_round(cake, a.repeats, os.path.join(tmp, f"round-{i + 1}")))
                peer_ms.append(peer_round(peer, a.repeats))
                print(f"round {i + 1}: cake {kernel_ms[-1]:.4f} ms, peer {peer_ms[-1]:.4f} ms", flush=True)
    except Skipped as e:
        print(f"SKIP: {e}")
        return NO_GPU
    except Failed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ratio = statistics.median(peer_ms) / statistics.median(kernel_ms)
    print(f"speed ratio {ratio:.3f} (median of the peer's {a.rounds} round medians over Cake's; above 1: Cake is faster)")
    if a.output:
        with open(a.output, "w") as f:
            json.dump({"schema": "cake-interleave/1", "cake": a.cake, "peer": a.peer, "rounds": a.rounds, "repeats": a.repeats,
                       "kernel_round_medians_ms": kernel_ms, "peer_round_medians_ms": peer_ms, "speed_ratio": ratio}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
