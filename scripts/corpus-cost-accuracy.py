#!/usr/bin/env python3
"""The cost model against the gpu tier's timings: for every case of the given families in a
corpus gpu results file (default: the families that got the gpu tier on 2026-11-30), predict the
case's time with `cake cost` at its workload's last shape (the shape whose median `time_us` the
gpu tier records) and print Spearman, MAPE and the predicted/measured ratio per family.

    cargo build -p cake && python3 scripts/corpus-cost-accuracy.py [RESULTS.json] [FAMILY ...] [--svg FILE]

`cake` is $CAKE_BIN, else target/release/cake, else target/debug/cake. With --svg FILE it also
draws predicted against measured time per family (log axes, the y = x line) with `cake-plot
scatter` from beside that `cake` (`cargo build -p cake-plot`), keeping the data in FILE.tsv.
Needs Python 3.11 (tomllib). Reads only; nothing is fitted.
"""
import json, os, subprocess, sys
import tomllib

CAKE = os.environ.get("CAKE_BIN") or next((p for p in ("./target/release/cake", "./target/debug/cake") if os.path.exists(p)), None)
if not CAKE or not os.path.exists(CAKE):
    sys.exit("error: no `cake` binary (CAKE_BIN, target/release/cake, target/debug/cake)\n  = help: run `cargo build -p cake` (or --release) first, or set CAKE_BIN")
args = sys.argv[1:]
svg = None
if "--svg" in args:
    i = args.index("--svg")
    if i + 1 >= len(args):
        sys.exit("error: `--svg` needs a file\n  = help: --svg target/cost-accuracy.svg")
    svg = args[i + 1]
    del args[i:i + 2]
path = args.pop(0) if args and args[0].endswith(".json") else "corpus/results/gpu-h200.json"
r = json.load(open(path))
fams = set(args) or {'tma-copy','tma-transpose','smem-view','softmax','row-reduce','rmsnorm','layernorm','elementwise'}
rows = []
tmp = '/tmp/corpus-cost-accuracy.cake'
for x in r['results']:
    fam = x['id'].split('/')[0]
    if fam not in fams or not x['observed'].get('time_us'): continue
    man = subprocess.run([CAKE,'corpus','show','--manifest',x['id']],capture_output=True,text=True).stdout
    m = tomllib.loads(man)
    shape = m['workload']['shapes'][-1]
    src = subprocess.run([CAKE,'corpus','show',x['id']],capture_output=True,text=True).stdout
    open(tmp, 'w').write(src)
    arg = ','.join(f'{k}={v}' for k,v in shape.items())
    out = subprocess.run([CAKE,'cost',tmp,'--shape',arg,'--message-format','json'],capture_output=True,text=True).stdout
    try:
        d = json.loads(out)
    except Exception:
        print('no estimate', x['id'], out[:200]); continue
    if 'predicted_ms' not in d:
        print('no estimate (target not calibrated?):', x['id'], file=sys.stderr)
        continue
    rows.append((x['id'], d['predicted_ms']*1e3, x['observed']['time_us'], d['bottleneck']))
def rank(v):
    s = sorted(range(len(v)), key=lambda i: v[i]); rk=[0]*len(v)
    for j,i in enumerate(s): rk[i]=j
    return rk
p=[a[1] for a in rows]; q=[a[2] for a in rows]
rp, rq = rank(p), rank(q); n=len(rows)
sp = 1 - 6*sum((a-b)**2 for a,b in zip(rp,rq))/(n*(n*n-1))
mape = sum(abs(a-b)/b for a,b in zip(p,q))/n*100
by = {}
for idd,pp,qq,b in rows:
    f=idd.split('/')[0]; by.setdefault(f,[]).append(pp/qq)
print(f"n={n} spearman={sp:.3f} mape={mape:.1f}%")
for f,v in sorted(by.items()):
    print(f"  {f:14s} n={len(v)} predicted/measured median={sorted(v)[len(v)//2]:.2f} min={min(v):.2f} max={max(v):.2f}")
if svg:
    plot = os.path.join(os.path.dirname(CAKE), "cake-plot")
    if not os.path.exists(plot):
        sys.exit(f"error: no {plot} to draw {svg}\n  = help: run `cargo build -p cake-plot` with the same profile as {CAKE}")
    with open(svg + ".tsv", "w") as f:
        f.write("# family\tmeasured us\tpredicted us (corpus gpu tier at the workload's last shape)\n")
        for idd, pp, qq, _ in rows:
            f.write(f"{idd.split('/')[0]}\t{qq}\t{pp}\n")
    subprocess.run([plot, "scatter", svg + ".tsv", "--log", "-o", svg, "--title", f"cost model vs gpu tier: n={n}, Spearman {sp:.3f}, MAPE {mape:.1f}%",
                    "--x-label", "measured us", "--y-label", "predicted us"], check=True)
