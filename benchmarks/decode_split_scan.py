"""Decode time per split count beside torch SDPA on a few bench shapes (GPU machine): what the split
rule leaves on the table. Prints one line per shape: splits:µs(SDPA time / cukiln time).

    python benchmarks/decode_split_scan.py
"""


import cukiln
from cukiln.decode_api import plan_call
from cukiln.tools.decode import _inputs, kv_bytes, torch_sdpa
from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets

copy = copy_tbps()
print(f"copy {copy:.3f}")
for b, T in ((1, 8192), (8, 512), (8, 8192), (32, 2048), (128, 2048), (128, 8192)):
    sets = rotating_sets(lambda: _inputs(b, T), kv_bytes(b, T))
    sd = median_ms([lambda s=s: torch_sdpa(*s) for s in sets])
    auto = plan_call(*sets[0], T).num_splits
    line = [f"b={b} T={T} sdpa {sd*1e3:.1f}us auto={auto}"]
    for n in (1, 2, 3, 4, 8, 16, 32, 64):
        if b * 8 * n > 20000: continue
        ms = median_ms([lambda s=s: cukiln.decode_attention(*s, T, num_splits=n) for s in sets])
        line.append(f"{n}:{ms*1e3:.1f}({sd/ms:.2f})")
    print(" ".join(line))
