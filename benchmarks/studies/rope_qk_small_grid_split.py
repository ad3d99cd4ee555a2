"""rope_qk at decode and small-prefill sizes: how far should a small grid spread its heads? The planner's split
(about one block per multiprocessor, each thread two heads) against two and four blocks per multiprocessor, and
one head a thread, beside FlashInfer's in-place cos|sin-cache call in the same run (when it imports). Same kernels;
the split forced through rope_plan.split_heads; each setting timed twice in mirrored order.

Run on a GPU from the repository root (FlashInfer on PYTHONPATH to include it):
python benchmarks/studies/rope_qk_small_grid_split.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch

import cukiln
from cukiln import rope_api, rope_plan
from cukiln.generated import dispatch
from cukiln.tools.timing import median_ms, rotating_sets, run_metadata

CASES = ((1, 32, 8, 128, False, torch.float32), (16, 32, 8, 128, False, torch.float32),
         (64, 32, 8, 128, False, torch.float32), (64, 32, 32, 64, True, torch.bfloat16),
         (64, 32, 32, 256, True, torch.bfloat16), (256, 32, 32, 256, True, torch.bfloat16))
_split = rope_plan.split_heads


def setting(per_sm: float, one_head: bool):
    """split_heads aiming at ``per_sm`` blocks a multiprocessor (0: the planner's own), ``one_head``: enough head
    rows that each thread rotates one head."""
    def split(block, grid, heads, sms):
        if per_sm == 0:
            return _split(block, grid, heads, sms)
        blocks = grid[0] * grid[1]
        rows = heads if one_head else -(-heads // dispatch.ROPE_HEADS_IN_FLIGHT)
        splits = max(1, min(-(-int(per_sm * sms) // blocks), rows))
        by = min(block[1], -(-rows // splits))
        return (block[0], by, block[2]), (grid[0], grid[1], -(-rows // by))
    rope_plan.split_heads = split
    rope_api.PLANS = type(rope_api.PLANS)()


def main(out_path: str) -> None:
    try:
        import flashinfer.rope as fi
    except Exception:
        fi = None
    settings = (("planner", 0, False), ("2 a SM", 2, False), ("4 a SM", 4, False), ("2 a SM, one head", 2, True),
                ("4 a SM, one head", 4, True))
    rows = []
    for t, hq, hk, d, inter, cache_dtype in CASES:
        cache = torch.rand(131072, d, device="cuda").to(cache_dtype)

        def make():
            qkv = torch.randn(t, (hq + 2 * hk) * d, device="cuda").to(torch.bfloat16)
            return qkv, torch.randint(0, 131072, (t,), device="cuda")

        sets = rotating_sets(make, 2 * t * (hq + 2 * hk) * d * 2)
        views = [(s[0][:, : hq * d], s[0][:, hq * d:(hq + hk) * d], s[1]) for s in sets]
        ours = [lambda v=v: cukiln.rope_qk(v[0].view(t, hq, d), v[1].view(t, hk, d), cos_sin_cache=cache,
                                           positions=v[2], layout="thd", interleaved=inter, inplace=True)
                for v in views]
        times = {}
        for name, per_sm, one in settings + tuple(reversed(settings)):
            setting(per_sm, one)
            times.setdefault(name, []).append(median_ms(ours) * 1e3)
        setting(0, False)
        row = {"t": t, "heads": f"{hq}/{hk}", "d": d, "interleaved": inter,
               **{name: sum(v) / 2 for name, v in times.items()}}
        if fi is not None:
            fi_cache = cache.float()
            row["flashinfer in place"] = median_ms(
                [lambda v=v: fi.apply_rope_with_cos_sin_cache_inplace(v[2], v[0], v[1], d, fi_cache, not inter)
                 for v in views]) * 1e3
        rows.append(row)
        print("  ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    with open(out_path, "w") as f:
        json.dump({**run_metadata("rope-qk-small-grid-split", "python benchmarks/studies/rope_qk_small_grid_split.py"),
                   "unit": "us", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
