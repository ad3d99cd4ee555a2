"""RoPE's kernels narrower than 16 bytes, each angle source: the kernels rows misaligned for 16-byte vectors take.
Run it in two trees (a kernel per source, and one taking its source at run time) to compare them, A B B A:

    python benchmarks/rope_narrow.py --out narrow.json

A bf16 [s, b, h, d] tensor whose rows are padded so that they are aligned to 8, 4 or 2 bytes (4, 2 or 1 elements an
access, the widths the planner then picks; each case checks it), rotated forward by each of the five angle sources;
each case's achieved bandwidth (x read, out written, the angles' bytes) as a ratio to a copy of the same bytes in the
same run. CUDA events, median (tools/timing.py), rotating buffers.
"""

from __future__ import annotations

import argparse
import json

SHAPE = (4096, 1, 32, 128)  # s, b, h, d: Llama's heads over 4k tokens, 32 MiB of bf16
PAD_FOR_WIDTH = {4: 4, 2: 2, 1: 1}  # elements added to each head's row: rows then aligned to 2 x width bytes


def sources(s: int, d: int, dtype):
    """Each angle source's keyword arguments for positions 0..s-1, and the bytes the kernel reads of it."""
    import torch

    inv = 1e4 ** (-torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d)
    angles = torch.arange(s, device="cuda", dtype=torch.float64)[:, None] * inv
    full = torch.cat([angles, angles], dim=1)
    cos, sin = full.cos(), full.sin()
    return {
        "freqs": ({"freqs": full.float()}, s * d * 4),
        "cossin": ({"cos": cos.to(dtype), "sin": sin.to(dtype)}, 2 * s * d * 2),
        "cossinf32": ({"cos": cos.float(), "sin": sin.float()}, 2 * s * d * 4),
        "invfreq": ({"inv_freq": inv.float()}, d * 2),
        "base": ({"base": 1e4}, 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    import torch

    import cukiln
    from cukiln.codegen.rope_variants import parse_rope_name
    from cukiln.rope_api import plan_call
    from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps

    s, b, h, d = SHAPE
    dtype = torch.bfloat16
    x_bytes = s * b * h * d * 2
    rows = []
    for width, pad in PAD_FOR_WIDTH.items():
        def make():
            x = torch.randn(s, b, h, d + pad, device="cuda", dtype=dtype)[..., :d]
            return x, torch.empty_like(x)

        sets = rotating_sets(make, 2 * x_bytes)
        for name, (angle_args, angle_bytes) in sources(s, d, dtype).items():
            plan, _ = plan_call(sets[0][0], out=sets[0][1], **angle_args)
            if parse_rope_name(plan.symbol).vec != width:
                raise SystemExit(f"rope_narrow.py: rows padded by {pad} took {plan.symbol}, not {width} an access")
            nbytes = 2 * x_bytes + angle_bytes
            copy = copy_tbps(nbytes, rotate=True)
            ms = median_ms([lambda x=x, o=o: cukiln.rope(x, out=o, **angle_args) for x, o in sets])
            rows.append({"width": width, "angles": name, "symbol": plan.symbol, "bytes": nbytes, "ms": ms,
                         "tbps": tbps(nbytes, ms), "x_copy": tbps(nbytes, ms) / copy})
            print(f"v{width} {name:<10} {plan.symbol:<42} {ms * 1e3:8.1f} us  {rows[-1]['x_copy']:.3f} x copy",
                  flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**run_metadata("rope-narrow", "python benchmarks/rope_narrow.py"), "cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
