#!/usr/bin/env bash
# Host µs per call of an older tree (A) against this one (B), A B B A on one GPU machine: `cukiln bench overhead
# --only REGEX` on each side in turn. The old tree is timed with this tree's overhead tool (copied over it), so
# that both sides time the same paths the same way. Run from the repository root on the GPU machine:
#   bash benchmarks/studies/ab_overhead.sh OLD.tar.xz REGEX   (a tarball of the old tree as old/)
# Each side's native hot path is compiled on its first use (about 40 s). JSON lands in $OUT (or ./ab-out).
set -uo pipefail
OLD_TAR=$1
ONLY=$2
OUT=${OUT:-ab-out}
NEW=$PWD
mkdir -p "$OUT" /tmp/abo && tar -xJf "$OLD_TAR" -C /tmp/abo
cp tools/overhead.py tools/bench.py tools/cli.py /tmp/abo/old/tools/
mkdir -p /tmp/abo/old/generated/cubins && cp -r generated/cubins/sm_90 /tmp/abo/old/generated/cubins/
n=0
for tag in A B B A; do
  n=$((n + 1))
  if [ $tag = A ]; then dir=/tmp/abo/old; else dir=$NEW; fi
  (cd $dir && python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1)
  (cd /tmp && cukiln bench overhead --only "$ONLY" --out "$OUT/overhead-$n-$tag.json" 2>&1 | grep -i "native\|error" | tail -3)
done
(cd "$NEW" && python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1)
python3 - "$OUT" <<'PY'
import glob, json, sys
runs = [json.load(open(p)) for p in sorted(glob.glob(f"{sys.argv[1]}/overhead-*.json"))]
print("path".ljust(72), "   A1     B2     B3     A4    B/A")
for name in runs[0]["paths"]:
    v = [r["paths"][name]["us_per_call"] for r in runs]
    print(name[:72].ljust(72), " ".join(f"{x:6.2f}" for x in v), f"{(v[1] + v[2]) / (v[0] + v[3]):.3f}")
PY
