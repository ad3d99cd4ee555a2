#!/usr/bin/env bash
# One GPU-machine session: install, run the GPU tests, tune the dispatch rules, benchmark. Results land in
# $OUT (or ./gpu-out). Carry generated/cubins when it was built elsewhere: the runtime loads cubins from there.
#   TESTS=path   which GPU tests (default: all)     TUNE=0  skip tuning (and the rebuild that folds it in)
#   BENCH=0      skip the benchmarks                 OPS="decode"  tune/bench only these (default: rope-thd rope decode;
#                                                    "overhead" is benchmarked only)
#   VERIFY=1     also run `cukiln verify` after the tests
#   BUILD=1      first build this GPU's arch here (`cukiln build --arch <its arch>`: about a minute on 16 cores); a
#                tuning made on those cubins is stale against the committed manifest wherever this machine's NVRTC
#                differs from the manifest's: to commit a tuning, carry cubins built with the manifest's NVRTC instead
#   JOBS=N       run the GPU tests in N processes (pytest-xdist; default 16 where it is installed, else 1)
#   BOUNDS=1     after the benchmarks, also time benchmarks/compiled_bounds.py: the floor under each compiled row of
#                the overhead bench, measured on the same machine in the same session
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"  # cukiln through python3
OUT=${OUT:-gpu-out}
OPS=${OPS:-rope-thd rope decode}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warning | tail -2
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${BUILD:-0}" = 1 ]; then
  arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  start=$SECONDS
  cukiln build --arch "$arch" --jobs "$(nproc)" 2>&1 | tail -3
  echo "cukiln build --arch $arch: $((SECONDS - start)) s"
fi
jobs=${JOBS:-$(python3 -c "import xdist" 2>/dev/null && echo 16 || echo 1)}
parallel=$([ "$jobs" -gt 1 ] && echo "-n $jobs" || true)
python3 -m pytest -m gpu -q --maxfail=10 -p no:cacheprovider $parallel ${TESTS:-tests} 2>&1 | tee "$OUT/pytest-gpu.log" | tail -15
if [ "${VERIFY:-0}" = 1 ]; then
  start=$SECONDS
  cukiln verify --out "$OUT/verify.json" 2>&1 | tee "$OUT/verify.log" | tail -8
  echo "cukiln verify: $((SECONDS - start)) s" | tee -a "$OUT/verify.log"
fi
if [ "${TUNE:-1}" = 1 ]; then
  for op in $OPS; do
    [ "$op" = overhead ] && continue
    start=$SECONDS
    cukiln tune "$op" 2>&1 | tee "$OUT/tune-$op.log" | tail -12
    echo "cukiln tune $op: $((SECONDS - start)) s" | tee -a "$OUT/tune-$op.log"
  done
  cp generated/tuning/*.json "$OUT/" 2>/dev/null
  # fold the new rules into dispatch.py for the benchmarks below (the kernels are the carried cubins)
  cukiln build --dispatch-only
fi
if [ "${BENCH:-1}" = 1 ]; then
  for op in $OPS; do
    cukiln bench "$op" --out "$OUT/bench-$op.json" 2>&1 | tee "$OUT/bench-$op.log" | tail -30
  done
fi
if [ "${BOUNDS:-0}" = 1 ]; then
  python3 benchmarks/compiled_bounds.py "$OUT" 2>&1 | tee "$OUT/compiled-bounds.log" | tail -8
fi
# A device call brings back 8 files at most: the logs and plots go back as one archive, the JSON (results, tuning
# tables) as they are
(cd "$OUT" && files=$(ls ./*.log ./*.png 2>/dev/null || true) && [ -n "$files" ] && tar czf logs.tar.gz $files && rm -f $files)
ls "$OUT"
