#!/usr/bin/env bash
# Two trees timed by one bench in one GPU session (`cukiln bench overhead` by default; BENCH below), in the order
# ORDER (default A B; A B B A cancels a drift of the host over the session), each tree installed in turn, its sm_90
# cubins built once (from the shared compile cache): for a change to the runtime's Python or C++ (overhead) or to the
# kernels' sources (BENCH). Run from the repository root on the GPU machine:
#   ROUNDS=7 bash benchmarks/ab_trees.sh DIR_A DIR_B     (each a copy of a tree; B is usually ".")
# ONLY=REGEX times only the paths whose name matches (`cukiln bench overhead --only`): one tree's whole bench takes
# about 4 minutes on an H200 (its torch.compile warm-ups most of it), so that both trees' fit one device call, split the
# paths, e.g. ONLY='^(?!torch.compile)' (the eager ones), then ONLY='^torch.compile' in a second call.
# JSON lands in $OUT (or ./ab-out) as overhead-<n>-<A|B>.json per run and overhead-ab.json (per path: A's and B's
# median µs over their runs, B / A, and the paired figures of each side averaged over its runs, and again within the
# host's fast and slow rounds, told apart by the reference's round time: a host that switches between two speeds moves
# a paired ratio by several per cent); a table of the paths whose time moved most is printed last. BUILD_ONLY=REGEX
# builds only the variants the timed paths launch (`cukiln build --only`, e.g. '^(decode|kv_append)' for the decode
# step's paths): the rope modules are most of a cold build. (The old tree's overhead bench builds every family's paths
# before --only picks: give it its whole build, no BUILD_ONLY.)
# BENCH='decode --kv-dtype fp8_e4m3' (any `cukiln bench` op and its options) times that bench instead of overhead, for a
# change to the kernels' sources: JSON as bench-<n>-<A|B>.json, and ab_table.py's table (each case's ratio to the copy,
# B over A) last. Every build's and bench's output goes to one $OUT/runs.log and the benches' PNGs are deleted: a
# device call brings back 8 files, so that four runs' JSON, the summary and the log come back.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"  # cukiln through python3
A=$1 B=$2
OUT=${OUT:-ab-out}
ROUNDS=${ROUNDS:-7}
ORDER=${ORDER:-A B}
BENCH=${BENCH:-overhead}
mkdir -p "$OUT"
built=""
n=0
for tag in $ORDER; do
  n=$((n + 1))
  dir=$A; [ $tag = B ] && dir=$B
  (cd "$dir" && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warn | tail -2
   case " $built " in *" $tag "*) ;; *) cukiln build --arch sm_90 ${BUILD_ONLY:+--only "$BUILD_ONLY"} >> "$OUT/runs.log" 2>&1 \
     || echo "build $tag failed: $OUT/runs.log";; esac
   if [ "$BENCH" = overhead ]; then
     cukiln bench overhead --rounds "$ROUNDS" ${ONLY:+--only "$ONLY"} --out "$OUT/overhead-$n-$tag.json" \
       >> "$OUT/runs.log" 2>&1 \
       || echo "bench $tag failed: $OUT/runs.log"
   else
     cukiln bench $BENCH --out "$OUT/bench-$n-$tag.json" >> "$OUT/runs.log" 2>&1 \
       || echo "bench $tag failed: $OUT/runs.log"
   fi)
  built="$built $tag"
done
rm -f "$OUT"/*.png
if [ "$BENCH" != overhead ]; then
  python3 "$(dirname "$0")/ab_table.py" "$OUT" bench
  exit 0
fi
python3 - "$OUT" <<'PY'
import json, sys

import glob
from statistics import mean, median

out = sys.argv[1]
runs = {t: [json.load(open(p))["paths"] for p in sorted(glob.glob(f"{out}/overhead-[0-9]*-{t}.json"))] for t in "AB"}
a, b = ({name: [r[name] for r in runs[t] if name in r] for name in runs[t][0]} for t in "AB")


def by_state(name, reference):
    """B/A of the path's paired ratio within the host's fast and within its slow rounds, told apart by the reference's
    round time (below or above the midpoint of its fastest and slowest round over every run of both sides): a host that
    switches between two speeds can shift the ratio by as much as the change measured, and the runs of the two sides
    need not mix the speeds alike. A state with fewer than 3 rounds on a side gives no figure."""
    ratios = {t: [] for t in "AB"}
    for t in "AB":
        for run in runs[t]:
            if name in run and reference in run:
                ratios[t] += zip(run[reference]["rounds_us"], run[name]["paired"]["rounds"])
    times = [us for t in "AB" for us, _ in ratios[t]]
    if not times:
        return {}
    cut = (min(times) + max(times)) / 2
    out = {}
    for state, fast in (("fast", True), ("slow", False)):
        side = {t: [r for us, r in ratios[t] if (us < cut) == fast] for t in "AB"}
        if min(len(side["A"]), len(side["B"])) >= 3:
            out[state] = {"b_over_a": median(side["B"]) / median(side["A"]), "rounds": [len(side["A"]), len(side["B"])]}
    return out


rows = {}
for name in a.keys() & b.keys():
    pa, pb = a[name], b[name]  # each side's runs of this path
    a_us, b_us = median(p["us_per_call"] for p in pa), median(p["us_per_call"] for p in pb)
    row = rows[name] = {"a_us": a_us, "b_us": b_us, "b_over_a": b_us / a_us, "runs": [len(pa), len(pb)]}
    qa, qb = [p.get("paired") or {} for p in pa], [p.get("paired") or {} for p in pb]
    if all("ratio" in q for q in qa + qb):  # each run against its own reference: drift between the runs cancels
        row["paired_b_over_a"] = mean(q["ratio"] for q in qb) / mean(q["ratio"] for q in qa)
        states = by_state(name, qa[0]["reference"])
        if states:
            row["paired_b_over_a_by_state"] = states
    elif all("difference_us" in q for q in qa + qb):
        row["paired_b_minus_a_us"] = mean(q["difference_us"] for q in qb) - mean(q["difference_us"] for q in qa)
json.dump({"paths": rows, "only_a": sorted(a.keys() - b.keys()), "only_b": sorted(b.keys() - a.keys())},
          open(f"{out}/overhead-ab.json", "w"), indent=1)
print(f"{'path':90s} {'A µs':>8s} {'B µs':>8s} {'B/A':>6s} {'paired B/A':>10s} {'fast':>6s} {'slow':>6s}")
for name, r in sorted(rows.items(), key=lambda item: -abs(item[1]["b_over_a"] - 1)):
    paired = f"{r['paired_b_over_a']:10.3f}" if "paired_b_over_a" in r else (
        f"{r['paired_b_minus_a_us']:+9.2f}µ" if "paired_b_minus_a_us" in r else "")
    states = r.get("paired_b_over_a_by_state", {})
    by = " ".join(f"{states[s]['b_over_a']:6.3f}" if s in states else f"{'':6s}" for s in ("fast", "slow"))
    print(f"{name[:90]:90s} {r['a_us']:8.2f} {r['b_us']:8.2f} {r['b_over_a']:6.3f} {paired:10s} {by}")
print("only in A:", sorted(a.keys() - b.keys()))
print("only in B:", sorted(b.keys() - a.keys()))
PY
