"""Does the tuned b = 1, T = 8k call (ws, 8 splits in a cluster) run 7x slow again, as one `cukiln bench decode`
run read it (results/decode-h100-2026-11-25-ws-retuned-no-peers.json)? The bench's timing (median_ms over its
rotating input sets), repeated 12 times, beside T = 2k and 32k; µs a call.

Run on the GPU from the repository root: python benchmarks/studies/decode_repeat_1x8k.py
"""

from __future__ import annotations

import torch

import cukiln
from cukiln.decode_api import plan_call
from cukiln.tools.decode.bench import inputs, kv_bytes
from cukiln.tools.timing import median_ms, rotating_sets

for b, T in ((1, 8192), (1, 2048), (1, 32768)):
    sets = rotating_sets(lambda: inputs(b, T), kv_bytes(b, T))
    outs = [torch.empty_like(s[0]) for s in sets]
    p = plan_call(*sets[0], T, out=outs[0])
    row = []
    for _ in range(12):
        row.append(median_ms([lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o) for s, o in zip(sets, outs)]) * 1e3)
    print(f"b={b} T={T} {p.attention.symbol} splits {p.num_splits} cluster {p.attention.cluster} sets {len(sets)}:",
          " ".join(f"{x:.1f}" for x in row))
    del sets, outs
