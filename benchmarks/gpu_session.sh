#!/usr/bin/env bash
# One GPU-machine session: install, run the GPU tests, tune the thd rule, benchmark. Results land in $OUT
# (or ./gpu-out). Carry generated/cubins when it was built elsewhere: the runtime loads cubins from there.
#   BENCH=0  skip the benchmarks      TUNE=0  skip `cukiln tune rope-thd` (and the rebuild that folds it in)
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warning | tail -2
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -m pytest -m gpu -q --maxfail=10 -p no:cacheprovider "${@:-tests}" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -15
if [ "${TUNE:-1}" = 1 ]; then
  cukiln tune rope-thd 2>&1 | tee "$OUT/tune-rope-thd.log" | tail -30
  cp generated/tuning/*.json "$OUT/" 2>/dev/null
  # fold the new rule into dispatch.py for the benchmarks below (local GPU arch only)
  arch=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(); print(f"sm_{m}{n}")')
  cukiln build --arch "$arch" --jobs "$(nproc)" 2>&1 | tail -3
fi
if [ "${BENCH:-1}" = 1 ]; then
  cukiln bench rope-thd --out "$OUT/bench-rope-thd.json" 2>&1 | tee "$OUT/bench-rope-thd.log" | tail -20
  cukiln bench rope --out "$OUT/bench-rope.json" 2>&1 | tee "$OUT/bench-rope.log" | tail -40
fi
