#!/usr/bin/env bash
# Two builds' sm_90 cubins timed by the benches in one GPU session, in the order A B B A (rope) and A B (rope-thd),
# so machine-to-machine spread does not enter the comparison. Run from the repository root on the GPU machine:
#   bash benchmarks/ab_cubins.sh DIR_A DIR_B     (each a copy of some build's generated/cubins/sm_90)
# The runtime loads whatever cubins lie in generated/cubins/sm_90; both builds must share dispatch.py (same
# kernel names and launch rule). JSON lands in $OUT (or ./ab-out) as rope-<n>-<A|B>.json and thd-<A|B>.json.
set -uo pipefail
A=$1 B=$2
OUT=${OUT:-ab-out}
mkdir -p "$OUT"
use() { rm -rf generated/cubins/sm_90 && cp -r "$1" generated/cubins/sm_90; }
n=0
for tag in A B B A; do
  n=$((n + 1))
  if [ $tag = A ]; then use "$A"; else use "$B"; fi
  cukiln bench rope --out "$OUT/rope-$n-$tag.json" > "$OUT/rope-$n-$tag.log" 2>&1
done
for tag in A B; do
  if [ $tag = A ]; then use "$A"; else use "$B"; fi
  cukiln bench rope-thd --out "$OUT/thd-$tag.json" > "$OUT/thd-$tag.log" 2>&1
done
python3 - "$OUT" <<'PY'
import glob, json, sys
runs = sorted(glob.glob(f"{sys.argv[1]}/rope-*.json"))
data = [json.load(open(p)) for p in runs]
print("rope x copy".ljust(40) + "".join(p.split("/")[-1][5:-5].rjust(9) for p in runs))
for k, c in enumerate(data[0]["cases"]):
    label = f"{c['shape_sbhd']} {c['view'][:4]} {c['dtype']} {c['direction']}"
    print(label.ljust(40) + "".join(f"{d['cases'][k]['cukiln']['x_copy']:9.3f}" for d in data))
print("in place rd = d/4, speedup".ljust(40) + "".join(f"{d['partial_in_place']['speedup']:9.3f}" for d in data))
PY
