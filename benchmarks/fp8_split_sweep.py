"""FP8 decode: the split count the planner picks against every other, on the bench's grid (GPU).

The planner takes FP8 caches' split counts from the bf16 table's narrow column (decode_plan.split_from_table), measured
on kernels that read twice the bytes a key. This times `cukiln.decode_attention` over e4m3 caches (per-tensor scales,
the bench's layout: K/V slices of [b, 8, T + 256, 128] buffers, bf16 q of 32 heads) at each split count forced by
`num_splits=`, beside the planner's own choice and a same-run 1 GiB copy, each output checked against the planner's
first:

    python benchmarks/fp8_split_sweep.py [--out JSON] [--cases 8x8192,32x32768,...]
"""

from __future__ import annotations

import argparse
import json

import torch

import cukiln
from cukiln.decode_api import plan_call
from cukiln.tools.decode.bench import BENCH_GRID, FP8_SCALE, fp8_inputs, kv_bytes, moved_bytes
from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps

SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def sweep_case(b: int, T: int, copy: float) -> dict:
    sets = rotating_sets(lambda: fp8_inputs(b, T)[:3], kv_bytes(b, T, 1))  # q and the FP8 caches alone
    outs = [torch.empty_like(s[0]) for s in sets]
    scales = {"k_scale": FP8_SCALE, "v_scale": FP8_SCALE}
    planned = plan_call(*sets[0], T, **scales).num_splits
    nbytes = moved_bytes(b, T, itemsize=1)
    ref = cukiln.decode_attention(*sets[0], T, **scales).float()
    row = {"batch": b, "T": T, "fp8_kv_bytes": kv_bytes(b, T, 1), "planned_splits": planned, "splits": {}}
    for splits in sorted(set(SPLITS) | {planned}):
        if plan_call(*sets[0], T, num_splits=splits, **scales).num_splits != splits:
            continue  # more splits than the keys take: the kernel would run fewer
        got = cukiln.decode_attention(*sets[0], T, num_splits=splits, **scales).float()
        ms = median_ms([lambda s=s, o=o, n=splits: cukiln.decode_attention(*s, T, out=o, num_splits=n, **scales)
                        for s, o in zip(sets, outs)])
        row["splits"][splits] = {"ms": ms, "x_copy": tbps(nbytes, ms) / copy,
                                 "max_abs_diff_vs_planned": (got - ref).abs().max().item()}
    best = min(row["splits"], key=lambda n: row["splits"][n]["ms"])
    row["best_splits"], row["planned_over_best"] = best, row["splits"][planned]["ms"] / row["splits"][best]["ms"]
    del sets, outs
    torch.cuda.empty_cache()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--cases", help="comma-separated BxT (default: the bench's grid from b = 8)")
    args = p.parse_args()
    cases = ([tuple(map(int, c.split("x"))) for c in args.cases.split(",")] if args.cases
             else [(b, T) for b, T in BENCH_GRID if b >= 8])
    copy = copy_tbps()
    rows = []
    for b, T in cases:
        row = sweep_case(b, T, copy)
        rows.append(row)
        planned, best = row["splits"][row["planned_splits"]], row["splits"][row["best_splits"]]
        print(f"b {b:4d} T {T:6d}  planned {row['planned_splits']:2d}: {planned['x_copy']:.3f}x copy   best "
              f"{row['best_splits']:2d}: {best['x_copy']:.3f}x   " +
              " ".join(f"{n}:{e['x_copy']:.3f}" for n, e in row["splits"].items()), flush=True)
    result = {**run_metadata("fp8-split-sweep", "python benchmarks/fp8_split_sweep.py"), "copy_tbps": copy,
              "cases": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
