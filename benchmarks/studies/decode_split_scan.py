"""Decode time per split count and K/V pipeline beside torch SDPA on a few bench shapes (GPU machine): what
the split rule leaves on the table. Prints one line per shape and pipeline: splits:µs(SDPA time / cukiln).

    python benchmarks/studies/decode_split_scan.py               # rotating input sets: K/V from DRAM, as bench does
    python benchmarks/studies/decode_split_scan.py --no-rotate   # one input set: K/V that fit in L2 come from it
    python benchmarks/studies/decode_split_scan.py --small       # the small grids only (b = 1, 8), every pipeline
"""

import argparse
import os

import cukiln
from cukiln.decode_api import plan_call
from cukiln.decode_plan import PIPELINE_ENV, PIPELINES
from cukiln.tools.decode import _inputs, kv_bytes, torch_sdpa
from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--no-rotate", action="store_true", help="time every call on one input set")
parser.add_argument("--small", action="store_true", help="b = 1 and 8 only, with every pipeline")
args = parser.parse_args()

copy = copy_tbps()
print(f"copy {copy:.3f} TB/s; {'one input set (L2 warm)' if args.no_rotate else 'rotating input sets'}")
shapes = ((1, 2048), (1, 8192), (1, 32768), (8, 512)) if args.small else \
    ((1, 8192), (8, 512), (8, 8192), (32, 2048), (128, 2048), (128, 8192))
counts = (2, 4, 8, 12, 16, 24, 32, 48, 64) if args.small else (1, 2, 3, 4, 8, 16, 32, 64)
pipelines = PIPELINES if args.small else ("narrow",)
for b, T in shapes:
    sets = [_inputs(b, T)] if args.no_rotate else rotating_sets(lambda: _inputs(b, T), kv_bytes(b, T))
    sd = median_ms([lambda s=s: torch_sdpa(*s) for s in sets])
    auto = plan_call(*sets[0], T)
    tuned = median_ms([lambda s=s: cukiln.decode_attention(*s, T) for s in sets])
    print(f"b={b} T={T} sdpa {sd * 1e3:.1f}us; table: {auto.num_splits} splits {auto.attention.symbol} "
          f"{tuned * 1e3:.1f}us ({sd / tuned:.2f})")
    for pipeline in pipelines:
        os.environ[PIPELINE_ENV] = pipeline
        line = [f"  {pipeline:6s}"]
        for n in counts:
            if b * 8 * n > 20000:
                continue
            ms = median_ms([lambda s=s: cukiln.decode_attention(*s, T, num_splits=n) for s in sets])
            line.append(f"{n}:{ms * 1e3:.1f}({sd / ms:.2f})")
        print(" ".join(line))
    os.environ.pop(PIPELINE_ENV, None)
