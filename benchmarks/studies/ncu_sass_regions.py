"""Where a kernel's warps spend their instructions and stalls, by region of its SASS.

    # GPU machine: per-instruction counters of the profiled calls, exported as CSV
    ncu --clock-control none --profile-from-start off --section SourceCounters --section WarpStateStats \
        -o rep python benchmarks/ncu_compare.py decode=8x512,1x8192
    ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    # anywhere
    python benchmarks/studies/ncu_sass_regions.py sass.csv [--kernel decode_bf16] [--min-share 0.01]

For every profiled kernel in the CSV: instructions executed and warp-stall samples in total, then the
SASS cut into regions of equal execution count per warp (a loop body runs as often as its trip count,
a prologue or epilogue once), each with its instructions per warp and its share of the stall samples.
Warps per launch come from the most executed first instruction (every warp runs it once).
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path


def kernels(text: str):
    """(kernel name, rows as dicts) for every kernel section of an `ncu --page source --csv` export."""
    for section in text.split('"Kernel Name",')[1:]:
        name, rest = section.split("\n", 1)
        rows = list(csv.DictReader(io.StringIO(rest)))
        yield name.strip().strip(",").strip('"'), [r for r in rows if r.get("Source")]


def regions(rows: list[dict]):
    """Runs of consecutive executed instructions with the same execution count: (first index, end index,
    executions per warp, instructions per warp, stall samples, first instruction's text)."""
    executed = [float(r["Instructions Executed"] or 0) for r in rows]
    samples = [float(r["Warp Stall Sampling (All Samples)"] or 0) for r in rows]
    warps = executed[0] or 1.0
    out, start = [], 0
    for k in range(1, len(rows) + 1):
        if k == len(rows) or (executed[k] != executed[start] and executed[k] > 0):
            per_warp = executed[start] / warps
            out.append((start, k, per_warp, sum(executed[start:k]) / warps, sum(samples[start:k]),
                        rows[start]["Source"].strip()))
            start = k
    return warps, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--kernel", default="", help="only kernels whose name contains this")
    parser.add_argument("--min-share", type=float, default=0.01,
                        help="list regions of at least this share of the samples (or 30 instructions a warp)")
    args = parser.parse_args()
    previous = None
    for name, rows in kernels(args.csv.read_text()):
        if args.kernel not in name:
            continue
        warps, parts = regions(rows)
        signature = (name, len(rows), tuple(p[3] for p in parts))
        if signature == previous:  # the export repeats some kernels' sections
            continue
        previous = signature
        total = sum(p[4] for p in parts) or 1.0
        executed = sum(p[3] for p in parts)
        print(f"{name[:100]}: {warps:.0f} warps, {executed:.0f} instructions a warp, {total:.0f} stall samples")
        for start, end, per_warp, instructions, samples, first in parts:
            if instructions > 30 or samples >= args.min_share * total:
                print(f"  [{start:5d}, {end:5d}) runs {per_warp:6.2f}x  {instructions:7.1f} instr/warp  "
                      f"{samples:5.0f} samples ({100 * samples / total:4.1f} %)  {first[:60]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
