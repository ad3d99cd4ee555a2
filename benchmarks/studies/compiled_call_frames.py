"""The Python calls in one compiled call (GPU): each torch.compile(fullgraph) row of `cukiln bench overhead` and
compiled ``add_``, warmed, then CALLS calls under sys.setprofile: every Python function called (file:function) and
every C function called from Python, per call (the 40 most frequent). Whether any cukiln Python code runs in a
compiled call (a plan-cache miss would run the op's Python kernel), and what a cukiln row calls that compiled
``add_`` does not.

    python benchmarks/studies/compiled_call_frames.py > compiled-call-frames.log
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import torch

from cukiln.tools import overhead

CALLS = 200
REPOSITORY = str(Path(__file__).resolve().parents[2]) + "/"
ROWS = r"torch\.compile\(fullgraph\) of (cukiln\.torch\.(rope_qk|decode_step|decode_attention|rope)|y\.add_)"


def _short(path: str) -> str:
    """A file's path from its package root (site-packages or the repository)."""
    return path.split("site-packages/")[-1].replace(REPOSITORY, "")


def calls_of(fn) -> collections.Counter:
    """The functions ``fn`` calls over CALLS calls, by name, and how often."""
    counts = collections.Counter()

    def record(frame, event, arg):
        if event == "call":
            code = frame.f_code
            counts[f"{_short(code.co_filename)}:{code.co_name}"] += 1
        elif event == "c_call":
            counts[f"C {getattr(arg, '__qualname__', getattr(arg, '__name__', '?'))}"] += 1

    sys.setprofile(record)
    for _ in range(CALLS):
        fn()
    sys.setprofile(None)
    torch.cuda.synchronize()
    return counts


def main() -> None:
    paths = {name: fn for name, fn in overhead._paths(only=ROWS).items() if overhead.compiles(name)}
    overhead._warm(paths)
    for name, fn in paths.items():
        counts = calls_of(fn)
        print(f"=== {name}: {sum(counts.values()) / CALLS:.1f} events per call")
        for function, n in counts.most_common(40):
            print(f"   {n / CALLS:5.2f}  {function}")


if __name__ == "__main__":
    main()
