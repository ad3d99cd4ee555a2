"""`cukiln bench NAME` (GPU): run one family's bench (its tool hooks' BENCHES) or the host-overhead bench, print
its table, and write its JSON (and a PNG plot beside it) with --out."""

from __future__ import annotations

import json
from pathlib import Path


def main(args) -> int:
    import torch

    from .hooks import benches

    console = args.console
    bench = None if args.op == "overhead" else benches()[args.op]
    for option in ("only", "rounds"):
        if bench is not None and getattr(args, option) is not None:
            raise ValueError(f"--{option} does not apply to `cukiln bench {args.op}`")
    for option in ("no_rotate", "kv_dtype", "paged", "q_len"):
        if getattr(args, option, None) and (bench is None or option not in bench.options):
            raise ValueError(f"--{option.replace('_', '-')} does not apply to `cukiln bench {args.op}`")
    if not torch.cuda.is_available():
        raise ValueError("needs a CUDA GPU, and torch sees none")
    if bench is None:
        from . import overhead

        result = overhead.run(console, args.quick, args.only, args.rounds)
        overhead.print_result(result, console)
    else:
        result = bench.run(console, args)
        bench.show(result, console)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        console.print(f"wrote {args.out}")
        if bench is not None and bench.contenders and not result.get("no_plot"):
            try:
                from .plots import plot

                console.print(f"wrote {plot(result, Path(args.out).with_suffix('.png'))}")
            except ImportError:
                console.print("(no plot: matplotlib is not installed; `cukiln plot` draws one from the JSON later)")
    return 0
