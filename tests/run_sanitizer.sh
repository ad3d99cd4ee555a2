#!/usr/bin/env bash
# The GPU tests under compute-sanitizer, split into shards that run as parallel processes on one GPU.
# Usage (GPU machine, project installed): bash tests/run_sanitizer.sh NAME [pytest selection args...]
#   TOOL=memcheck|racecheck (default memcheck)   SHARDS=8   OUT=folder for the logs (default sanitizer-out)
#   CACHING=0: PyTorch's caching allocator off (default), so that every tensor is its own allocation and an
#              access past its end is caught; CACHING=1 for tests that allocate during CUDA graph capture.
# Prints one line per shard and a total; exits 1 if any shard reported an error or a test failed.
set -uo pipefail
name=$1
shift
TOOL=${TOOL:-memcheck}
SHARDS=${SHARDS:-8}
OUT=${OUT:-sanitizer-out}/$name
mkdir -p "$OUT"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
python3 -m pytest -m gpu -q --collect-only -p no:cacheprovider "$@" 2>/dev/null | grep '::' > "$OUT/ids.txt"
total=$(wc -l < "$OUT/ids.txt")
[ "$total" -gt 0 ] || { echo "$name: no test selected"; exit 1; }
# Round robin, so that each shard gets a mix of the slow and the quick tests of every file.
awk -v n="$SHARDS" -v dir="$OUT" '{ print > (dir "/shard." (NR - 1) % n) }' "$OUT/ids.txt"
caching_env=()
[ "${CACHING:-0}" = 1 ] || caching_env=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
start=$SECONDS
for shard in "$OUT"/shard.*; do
  (
    mapfile -t ids < "$shard"
    # --report-api-errors no: cuda-bindings probes driver entry points with cuGetProcAddress, which reports
    # CUDA_ERROR_INVALID_VALUE for symbols the driver lacks (not an error of this project).
    env "${caching_env[@]}" "$sanitizer" --tool "$TOOL" --report-api-errors no --error-exitcode 9 \
      python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > "$shard.log" 2>&1
    echo $? > "$shard.rc"
  ) &
done
wait
status=0
for shard in "$OUT"/shard.*[0-9]; do
  summary=$(grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$shard.log" | tail -1)
  result=$(grep -E "[0-9]+ (passed|failed)" "$shard.log" | tail -1)
  rc=$(cat "$shard.rc")
  echo "$name $(basename "$shard") rc=$rc | ${summary:-no summary} | $result"
  if [ "$rc" != 0 ]; then
    status=1
    grep -E "^(FAILED|ERROR) " "$shard.log" | head -5  # the failing tests, named
  fi
done
echo "$name: $TOOL over $total tests in $SHARDS shards, $((SECONDS - start)) s, $([ $status = 0 ] && echo clean || echo FAILED)"
exit $status
