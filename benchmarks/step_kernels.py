"""Each kernel's GPU time inside cukiln's paged decode step, beside the same kernels launched alone: where a step's
time over its attention goes (torch.profiler's CUDA activity; the calls queued behind a sleep, as in bench conditions).

    python benchmarks/step_kernels.py TAG OUT.json      (on a GPU, from outside the repository root; TAG labels rows)

The step, the paged attention alone and the paged append alone of `cukiln bench decode-step` (GQA 32/8, d 128, bf16,
page-16 pools, a cos|sin cache) at b = 8, L = 2048 and b = 1, L = 32768: per kernel name (first 40 characters) its
median µs over 40 calls, and the median gap before each kernel (negative: it started before the one before it ended).
"period_us" is the host's pace under the profiler, not a GPU time. (The JSON of 2026-12-03 came from this script with
the three calls built by the bench's builders by name, as `contenders` builds them.)
"""
import json
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from cukiln.tools.decode_step import bench as B

out = {}
for b, L in ((8, 2048), (1, 32768)):
    s = B.setup_case(B.SETS[0], b, L)
    s["out"] = torch.empty_like(s["q"])
    built = B.contenders(B.SETS[0], s, ["cukiln paged decode_step", B.PAGED_BAR, B.APPENDS[0]])
    fns = dict(zip(("step", "attention", "append"), built.values()))
    for name, fn in fns.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.cuda._sleep(20_000_000)
            for _ in range(40):
                fn()
            torch.cuda.synchronize()
        ev = sorted([e for e in prof.events() if e.device_type.name == "CUDA" and "sleep" not in e.name],
                    key=lambda e: e.time_range.start)
        kinds = {}
        for e in ev:
            kinds.setdefault(e.name[:40], []).append(e.time_range.end - e.time_range.start)
        gaps = [ev[i + 1].time_range.start - ev[i].time_range.end for i in range(len(ev) - 1)]
        period = (ev[-1].time_range.end - ev[0].time_range.start) / 40
        row = {"period_us": period, "kernels": {k: statistics.median(v) for k, v in kinds.items()},
               "median_gap_us": statistics.median(gaps) if gaps else None,
               "gaps_by_next": {}}
        for i in range(len(ev) - 1):
            row["gaps_by_next"].setdefault(ev[i + 1].name[:40], []).append(gaps[i])
        row["gaps_by_next"] = {k: statistics.median(v) for k, v in row["gaps_by_next"].items()}
        out[f"b{b} L{L} {name}"] = row
        print(sys.argv[1], f"b{b} L{L} {name}", json.dumps(row))
json.dump(out, open(sys.argv[2], "w"), indent=1)
