"""decode_step against decode_attention alone (GPU µs, median_ms) at a few 32/8 points, whichever cubins are
installed: JSON to argv[1]. Run on two builds A B B A (the cache append with and without an early
allow_dependent_launch; results/decode-step-trigger-ab-h100-2026-11-25.json)."""
import json
import sys

import torch

from cukiln.tools import decode_step_bench as dsb
from cukiln.tools.timing import median_ms
cs = dsb.SETS[0]
rows = []
for b, L in ((1, 2048), (1, 32768), (8, 8192), (32, 2048), (32, 8192), (128, 32768)):
    s = dsb.setup_case(cs, b, L)
    fns = dsb.contenders(cs, s, [dsb.BAR, "cukiln decode_step"])
    row = {"b": b, "L": L}
    for name, fn in fns.items():
        row[name] = median_ms([fn]) * 1e3
    row["extra_us"] = row["cukiln decode_step"] - row[dsb.BAR]
    rows.append(row)
    print(row, flush=True)
    del s
    torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[1], "w"), indent=1)
