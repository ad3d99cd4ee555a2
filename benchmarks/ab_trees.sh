#!/usr/bin/env bash
# Two trees' host time per call, `cukiln bench overhead` in one GPU session, in the order A B (each installed in turn,
# its sm_90 cubins built from the shared compile cache): for a change to the runtime's Python or C++, where the
# cubins are the same. Run from the repository root on the GPU machine:
#   ROUNDS=7 bash benchmarks/ab_trees.sh DIR_A DIR_B     (each a copy of a tree; B is usually ".")
# ONLY=REGEX times only the paths whose name matches (`cukiln bench overhead --only`): one tree's whole bench takes
# about 4 minutes on an H200 (its torch.compile warm-ups most of it), so that both trees' fit one device call, split the
# paths, e.g. ONLY='^(?!torch.compile)' (the eager ones), then ONLY='^torch.compile' in a second call.
# JSON lands in $OUT (or ./ab-out) as overhead-A.json, overhead-B.json and overhead-ab.json (per path: A's and B's
# median µs, B / A, and the paired figures of each side); a table of the paths whose time moved most is printed last.
set -uo pipefail
A=$1 B=$2
OUT=${OUT:-ab-out}
ROUNDS=${ROUNDS:-7}
mkdir -p "$OUT"
for tag in A B; do
  dir=$A; [ $tag = B ] && dir=$B
  (cd "$dir" && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warn | tail -2
   cukiln build --arch sm_90 > "$OUT/build-$tag.log" 2>&1 || echo "build $tag failed: $OUT/build-$tag.log"
   cukiln bench overhead --rounds "$ROUNDS" ${ONLY:+--only "$ONLY"} --out "$OUT/overhead-$tag.json" \
     > "$OUT/overhead-$tag.log" 2>&1 \
     || echo "bench $tag failed: $OUT/overhead-$tag.log")
done
python3 - "$OUT" <<'PY'
import json, sys

out = sys.argv[1]
a, b = (json.load(open(f"{out}/overhead-{t}.json"))["paths"] for t in "AB")
rows = {}
for name in a.keys() & b.keys():
    pa, pb = a[name], b[name]
    row = rows[name] = {"a_us": pa["us_per_call"], "b_us": pb["us_per_call"],
                        "b_over_a": pb["us_per_call"] / pa["us_per_call"]}
    qa, qb = pa.get("paired") or {}, pb.get("paired") or {}
    if "ratio" in qa and "ratio" in qb:  # each side against its own run's reference: drift between the runs cancels
        row["paired_b_over_a"] = qb["ratio"] / qa["ratio"]
    elif "difference_us" in qa and "difference_us" in qb:
        row["paired_b_minus_a_us"] = qb["difference_us"] - qa["difference_us"]
json.dump({"paths": rows, "only_a": sorted(a.keys() - b.keys()), "only_b": sorted(b.keys() - a.keys())},
          open(f"{out}/overhead-ab.json", "w"), indent=1)
print(f"{'path':90s} {'A µs':>8s} {'B µs':>8s} {'B/A':>6s} {'paired B/A':>10s}")
for name, r in sorted(rows.items(), key=lambda item: -abs(item[1]["b_over_a"] - 1)):
    paired = f"{r['paired_b_over_a']:10.3f}" if "paired_b_over_a" in r else (
        f"{r['paired_b_minus_a_us']:+9.2f}µ" if "paired_b_minus_a_us" in r else "")
    print(f"{name[:90]:90s} {r['a_us']:8.2f} {r['b_us']:8.2f} {r['b_over_a']:6.3f} {paired}")
print("only in A:", sorted(a.keys() - b.keys()))
print("only in B:", sorted(b.keys() - a.keys()))
PY
