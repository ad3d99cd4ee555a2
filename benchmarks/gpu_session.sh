#!/usr/bin/env bash
# One GPU-machine session: install, run the GPU tests, benchmark. Results land in $OUT (or ./gpu-out).
# Carry generated/cubins when it was built elsewhere: the runtime loads cubins from there.
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warning | tail -2
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -m pytest -m gpu -q --maxfail=10 -p no:cacheprovider "${@:-tests}" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25
if [ "${BENCH:-1}" = 1 ]; then
  cukiln bench rope --out "$OUT/bench-rope.json" 2>&1 | tee "$OUT/bench-rope.log"
fi
