#!/usr/bin/env bash
# Two builds' sm_90 cubins timed by the benches in one GPU session, in the order A B B A, so machine-to-machine
# spread does not enter the comparison. Run from the repository root on the GPU machine:
#   OPS="rope rope-thd decode" bash benchmarks/ab_cubins.sh DIR_A DIR_B   (each a copy of some build's
#                                                                          generated/cubins/sm_90)
# OPS: the benches to run (default: rope rope-thd). The runtime loads whatever cubins lie in
# generated/cubins/sm_90; both builds must share dispatch.py (same kernel names and launch rules). JSON lands in
# $OUT (or ./ab-out) as <bench>-<n>-<A|B>.json, and a table of each case's ratio to the copy is printed last.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"  # cukiln through python3
A=$1 B=$2
OUT=${OUT:-ab-out}
OPS=${OPS:-rope rope-thd}
mkdir -p "$OUT"
keep=$(mktemp -d)
# copies of both builds first: either may be the folder the runtime loads from (generated/cubins/sm_90)
cp -r generated/cubins/sm_90 "$keep/current" && cp -r "$A" "$keep/A" && cp -r "$B" "$keep/B"
A=$keep/A B=$keep/B
use() { rm -rf generated/cubins/sm_90 && cp -r "$1" generated/cubins/sm_90; }
for op in $OPS; do
  n=0
  for tag in A B B A; do
    n=$((n + 1))
    if [ $tag = A ]; then use "$A"; else use "$B"; fi
    cukiln bench "$op" --out "$OUT/$op-$n-$tag.json" > "$OUT/$op-$n-$tag.log" 2>&1 || echo "cukiln bench $op ($tag) failed: $OUT/$op-$n-$tag.log"
  done
done
use "$keep/current"
python3 "$(dirname "$0")/ab_table.py" "$OUT" $OPS
