"""Where the compiled rows' round-to-round spread comes from (GPU): compiled ``add_`` (and a compiled rope_qk beside
it), 9 rounds of 5000 calls under: the default; the collector's heap frozen after warm-up; one CPU core; both. Then
120 pairs of 500-call blocks in turns, the collector's heap frozen.

    python benchmarks/studies/compiled_round_spread.py OUT_DIR

Writes OUT_DIR/noise.json. (Its recorded run passed the views to rope_qk without layout="thd": the rope_qk part
failed to compile there, and only compiled ``add_`` was timed.)
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys

import torch

import cukiln.torch as ct
from cukiln.tools.overhead import per_call_us

y = torch.randn(1, 1, 1, 64, device="cuda")
add = torch.compile(lambda t: t.add_(1.0), fullgraph=True)
qkv = torch.randn(1, 1, 3 * 8 * 128, device="cuda", dtype=torch.bfloat16)
positions = torch.zeros(1, dtype=torch.int64, device="cuda")
table = torch.randn(4096, 128, device="cuda", dtype=torch.float32)


def rotate(t, p, c):
    q, k = t[..., :4 * 128].view(1, 4, 128), t[..., 4 * 128:5 * 128].view(1, 1, 128)
    return ct.rope_qk(q, k, positions=p, cos_sin_cache=c, layout="thd", inplace=True)


def rounds(label, qk, n=9):
    """n rounds of compiled add_ and (where it compiled) rope_qk, with the collector's runs in each."""
    adds, qks, collections = [], [], []
    for _ in range(n):
        before = sum(s["collections"] for s in gc.get_stats())
        adds.append(per_call_us(lambda: add(y), 5000))
        if qk is not None:
            qks.append(per_call_us(lambda: qk(qkv, positions, table), 5000))
        collections.append(sum(s["collections"] for s in gc.get_stats()) - before)
    differences = [b - a for a, b in zip(adds, qks)]
    print(f"{label:<14} add_ median {statistics.median(adds):6.1f} spread {max(adds) - min(adds):5.1f} | "
          f"rope_qk - add_ median {statistics.median(differences) if differences else float('nan'):6.1f} | "
          f"collections {collections}")
    return {"add_": adds, "rope_qk": qks, "diff": differences, "collections": collections}


def main(out_dir):
    try:
        qk = torch.compile(rotate, fullgraph=True)
        for _ in range(200):
            qk(qkv, positions, table)
    except Exception as e:  # recorded, and add_ timed alone
        print("rope_qk compile failed:", repr(e)[:300])
        qk = None
    for _ in range(200):
        add(y)
    torch.cuda.synchronize()
    out = {"default": rounds("default", qk)}
    gc.collect()
    gc.freeze()
    out["frozen"] = rounds("gc frozen", qk)
    gc.unfreeze()
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[len(cpus) // 2]})
    out["one core"] = rounds("one core", qk)
    gc.collect()
    gc.freeze()
    out["both"] = rounds("both", qk)
    os.sched_setaffinity(0, set(cpus))
    out["cpus"] = len(cpus)
    adds, differences = [], []  # fine turns: 120 pairs of 500-call blocks
    for _ in range(120):
        adds.append(per_call_us(lambda: add(y), 500))
        if qk is not None:
            differences.append(per_call_us(lambda: qk(qkv, positions, table), 500) - adds[-1])
    out["fine"] = {"add_": adds, "diff": differences}
    with open(os.path.join(out_dir, "noise.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
