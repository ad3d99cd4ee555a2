"""decode_step against decode_attention alone (GPU µs) on the QK-norm set (GQA 64/8) and the 32/8 set, whichever
cubins are installed; host µs of decode_step at b 1: JSON to argv[1] (results/qk-norm-lanes-ab-h100-2026-11-25.json)."""
import json
import sys

import torch

from cukiln.tools import decode_step_bench as dsb
from cukiln.tools.overhead import per_call_us
from cukiln.tools.timing import median_ms

rows = []
for cs in (dsb.SETS[2], dsb.SETS[0]):
    for b, L in ((1, 8192), (8, 8192), (32, 8192), (128, 8192)):
        s = dsb.setup_case(cs, b, L)
        fns = dsb.contenders(cs, s, [dsb.BAR, "cukiln decode_step"])
        row = {"set": cs.title, "b": b, "L": L}
        for name, fn in fns.items():
            row[name] = median_ms([fn]) * 1e3
        row["extra_us"] = row["cukiln decode_step"] - row[dsb.BAR]
        if b == 1:
            step = fns["cukiln decode_step"]
            per_call_us(step, 300)
            row["host_us"] = sorted(per_call_us(step, 2000) for _ in range(5))[2]
            y = torch.zeros(1, device="cuda")
            row["add_host_us"] = sorted(per_call_us(lambda: y.add_(1.0), 2000) for _ in range(5))[2]
        rows.append(row)
        print(row, flush=True)
        del s
        torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[1], "w"), indent=1)
