#!/usr/bin/env bash
# Kernel times of an older tree (A) against this one (B), A B B A on one GPU, for changes that alter the kernels'
# ABI (ab_cubins.sh needs one dispatch.py for both). Run from the repository root on the GPU machine:
#   bash benchmarks/studies/ab_trees.sh OLD.tar.xz   (a tarball of the old tree as old/, its generated/cubins/sm_90 built)
# Each side is installed in turn (pip install -e) and timed by kernel_times.py; JSON lands in $OUT (or ./ab-out).
set -uo pipefail
OLD_TAR=$1
OUT=${OUT:-ab-out}
NEW=$PWD
mkdir -p "$OUT" /tmp/abt && tar -xJf "$OLD_TAR" -C /tmp/abt
n=0
for tag in A B B A; do
  n=$((n + 1))
  if [ $tag = A ]; then dir=/tmp/abt/old; else dir=$NEW; fi
  (cd $dir && python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1)
  (cd /tmp && python3 "$NEW/benchmarks/studies/kernel_times.py" "$OUT/kt-$n-$tag.json" 2>&1 | tail -2)
done
(cd "$NEW" && python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1)
python3 - "$OUT" <<'PY'
import glob, json, sys
runs = [json.load(open(p)) for p in sorted(glob.glob(f"{sys.argv[1]}/kt-*.json"))]
print("case".ljust(48), "A1 ms    B2 ms    B3 ms    A4 ms    B/A")
for i, row in enumerate(runs[0]["rows"]):
    v = [r["rows"][i]["ms"] for r in runs]
    print(row["case"][:48].ljust(48), " ".join(f"{x * 1e3:8.2f}" for x in v), f"{(v[1] + v[2]) / (v[0] + v[3]):.3f}")
PY
