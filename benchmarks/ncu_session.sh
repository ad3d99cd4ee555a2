#!/usr/bin/env bash
# GPU machine: decode GPU tests, Nsight Compute counters of decode (and RoPE) beside their references,
# copy bandwidth by size, then `cukiln bench decode`. Results land in $OUT (or ./gpu-out).
#   NCU_CASES="decode=32x8192 rope-thd"   ncu_compare.py's cases (default: decode)
#   L2=1   the L2's request and sector tables too (MemoryWorkloadAnalysis_Tables: sectors a request, hits by source,
#          the fabric between the L2's halves): on an H200 cukiln's decode kernels saw a quarter to half of their
#          sector lookups hit where cuDNN's saw under 1 % (results/ncu-decode-rope-thd-h200-2026-12-02.txt)
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"  # cukiln through python3
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warning | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/runtime/test_decode_gpu.py 2>&1 | tail -3
ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats \
  $([ "${L2:-0}" = 1 ] && echo "--section MemoryWorkloadAnalysis_Tables") \
  python3 benchmarks/ncu_compare.py ${NCU_CASES:-decode} > "$OUT/ncu.txt" 2>&1; echo "ncu rc $?"
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Warp Cycles Per Issued" "$OUT/ncu.txt" | cut -c1-90 | head -60
python3 benchmarks/copy_sizes.py 2>&1 | tee "$OUT/copy-sizes.txt"
cukiln bench decode --out "$OUT/bench-decode.json" 2>&1 | tail -22
