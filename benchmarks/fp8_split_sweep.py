"""FP8 decode: the split count the planner picks against every other, per pipeline, on the bench's grid (GPU).

The planner takes FP8 caches' pipeline and split counts from the bf16 table (decode_plan.split_from_table), measured on
kernels that read twice the bytes a key. This times `cukiln.decode_attention` over e4m3 caches (per-tensor scales, the
bench's layout: K/V slices of [b, 8, T + 256, 128] buffers, bf16 q of 32 heads) on each pipeline (forced as
CUKILN_DECODE_PIPELINE forces it) at each split count forced by `num_splits=`, beside the planner's own choice and a
same-run 1 GiB copy, each output checked against the planner's:

    python benchmarks/fp8_split_sweep.py [--out JSON] [--cases 8x8192,32x32768,...] [--pipelines narrow,ws,ws_deep]
"""

from __future__ import annotations

import argparse
import json

import torch

import cukiln
from cukiln.decode_api import plan_call
from cukiln.tools.decode.checks import forced_decode_pipeline
from cukiln.tools.decode.bench import BENCH_GRID, FP8_SCALE, fp8_inputs, kv_bytes, moved_bytes
from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps

SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def sweep_case(b: int, T: int, copy: float, pipelines: list[str]) -> dict:
    sets = rotating_sets(lambda: fp8_inputs(b, T)[:3], kv_bytes(b, T, 1))  # q and the FP8 caches alone
    outs = [torch.empty_like(s[0]) for s in sets]
    scales = {"k_scale": FP8_SCALE, "v_scale": FP8_SCALE}
    plan = plan_call(*sets[0], T, **scales)
    planned = (plan.pipeline, plan.num_splits)
    nbytes = moved_bytes(b, T, itemsize=1)
    ref = cukiln.decode_attention(*sets[0], T, **scales).float()
    row = {"batch": b, "T": T, "fp8_kv_bytes": kv_bytes(b, T, 1), "planned": list(planned), "pipelines": {}}
    for pipeline in pipelines:
        with forced_decode_pipeline(pipeline):
            timed = row["pipelines"][pipeline] = {}
            for splits in sorted(set(SPLITS) | ({planned[1]} if pipeline == planned[0] else set())):
                if plan_call(*sets[0], T, num_splits=splits, **scales).num_splits != splits:
                    continue  # more splits than the keys take: the kernel would run fewer
                got = cukiln.decode_attention(*sets[0], T, num_splits=splits, **scales).float()
                ms = median_ms([lambda s=s, o=o, n=splits: cukiln.decode_attention(*s, T, out=o, num_splits=n,
                                                                                    **scales)
                                for s, o in zip(sets, outs)])
                timed[splits] = {"ms": ms, "x_copy": tbps(nbytes, ms) / copy,
                                 "max_abs_diff_vs_planned": (got - ref).abs().max().item()}
    best = min(((p, n) for p, timed in row["pipelines"].items() for n in timed),
               key=lambda pn: row["pipelines"][pn[0]][pn[1]]["ms"])
    row["best"] = list(best)
    if planned[0] in row["pipelines"]:
        row["planned_over_best"] = (row["pipelines"][planned[0]][planned[1]]["ms"]
                                    / row["pipelines"][best[0]][best[1]]["ms"])
    del sets, outs
    torch.cuda.empty_cache()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--cases", help="comma-separated BxT (default: the bench's grid from b = 8)")
    p.add_argument("--pipelines", default="narrow", help="comma-separated pipelines to force (default: narrow)")
    args = p.parse_args()
    pipelines = args.pipelines.split(",")
    cases = ([tuple(map(int, c.split("x"))) for c in args.cases.split(",")] if args.cases
             else [(b, T) for b, T in BENCH_GRID if b >= 8])
    copy = copy_tbps()
    rows = []
    for b, T in cases:
        row = sweep_case(b, T, copy, pipelines)
        rows.append(row)
        (bp, bn), timed = row["best"], row["pipelines"]
        planned = (f"{timed[row['planned'][0]][row['planned'][1]]['x_copy']:.3f}x copy"
                   if row["planned"][0] in timed else "not swept")
        print(f"b {b:4d} T {T:6d}  planned {row['planned'][0]} {row['planned'][1]:2d}: {planned}   best {bp} {bn:2d}: "
              f"{timed[bp][bn]['x_copy']:.3f}x", flush=True)
        for pipeline, by_splits in timed.items():
            print(f"    {pipeline:8s}" + " ".join(f"{n}:{e['x_copy']:.3f}" for n, e in by_splits.items()), flush=True)
    result = {**run_metadata("fp8-split-sweep", "python benchmarks/fp8_split_sweep.py"),
              "pipelines": pipelines, "copy_tbps": copy,
              "cases": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
