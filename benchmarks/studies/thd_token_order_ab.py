"""Packed [t, h, d] tensors with explicit positions: one token a block (every head visited once, the launch the
planner means for heads inside tokens) against two tokens a block with half the head rows each (what the planner
chose before it read thd's dense view right: its batch dim has one entry and stride 0). Same kernels, same run,
launch shapes forced through rope_plan.block_shape, A B B A per case; serving shapes (rope_qk on a fused qkv,
GQA 32/8, d 128, bf16, fp32 cos|sin cache, in place) and single-tensor rope.

Run on a GPU from the repository root: python benchmarks/studies/thd_token_order_ab.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch

import cukiln
from cukiln import rope_api, rope_plan
from cukiln.tools.timing import median_ms, rotating_sets, run_metadata, tbps

TOKENS = (1, 16, 64, 256, 4096, 65536)
_block_shape = rope_plan.block_shape


def forced(head_outer: bool):
    """block_shape with heads-outside-tokens forced; the plan cache emptied so that calls plan again."""
    rope_plan.block_shape = lambda g, h, t, _, mx, mn: _block_shape(g, h, t, head_outer, mx, mn)
    rope_api.PLANS = type(rope_api.PLANS)()


def case(t: int, pair: bool) -> tuple[list, int]:
    cache = torch.rand(131072, 128, device="cuda")

    def make():
        qkv = torch.randn(t, 48 * 128, device="cuda").to(torch.bfloat16)
        q, k = qkv[:, :4096].view(t, 32, 128), qkv[:, 4096:5120].view(t, 8, 128)
        pos = torch.randint(0, 131072, (t,), device="cuda")
        return q, k, pos

    heads = 40 if pair else 32
    nbytes = 2 * t * heads * 128 * 2 + t * (128 * 4 + 8)
    sets = rotating_sets(make, nbytes)
    if pair:
        calls = [lambda s=s: cukiln.rope_qk(s[0], s[1], cos_sin_cache=cache, positions=s[2], layout="thd",
                                            inplace=True) for s in sets]
    else:
        calls = [lambda s=s: cukiln.rope(s[0], cos_sin_cache=cache, positions=s[2], layout="thd", inplace=True)
                 for s in sets]
    return calls, nbytes


def main(out_path: str) -> None:
    rows = []
    for pair in (True, False):
        for t in TOKENS:
            calls, nbytes = case(t, pair)
            times = {"one token a block": [], "two tokens a block": []}
            for name, outer in (("one token a block", False), ("two tokens a block", True),
                                ("two tokens a block", True), ("one token a block", False)):
                forced(outer)
                times[name].append(median_ms(calls))
            row = {"op": "rope_qk" if pair else "rope", "tokens": t, "bytes": nbytes}
            for name, ms in times.items():
                row[name] = {"ms": ms, "tbps": tbps(nbytes, sum(ms) / 2)}
            row["new / old time"] = (sum(times["one token a block"]) / sum(times["two tokens a block"]))
            rows.append(row)
            print(f"{row['op']:8s} t={t:6d}  one/token {sum(times['one token a block']) / 2 * 1e3:8.2f} us  "
                  f"two/token {sum(times['two tokens a block']) / 2 * 1e3:8.2f} us  ratio {row['new / old time']:.3f}")
    rope_plan.block_shape = _block_shape
    result = {**run_metadata("thd-token-order-ab", "python benchmarks/studies/thd_token_order_ab.py"), "rows": rows}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
