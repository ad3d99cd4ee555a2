"""Where the host time of one `cukiln.rope` call goes (GPU machine): the whole call, the call without the
foreign-array wrapper, the plan-cache hit alone, the launch alone, and torch's `add_` beside them.
Each figure: 10 000 calls on a [1, 1, 1, 64] fp32 tensor (in place, base angles), then one synchronize.

    python benchmarks/host_overhead.py [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import time


def per_call_us(fn, calls: int = 10_000) -> float:
    import torch

    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()

    import torch

    import cukiln
    from cukiln import launch, rope_api
    from cukiln.tools.timing import run_metadata

    x = torch.randn(1, 1, 1, 64, device="cuda")
    for _ in range(200):  # warm: module loaded, plan cached
        cukiln.rope(x, base=10000.0, inplace=True)
    torch.cuda.synchronize()
    p, values, _, _ = rope_api._prepare(x, base=10000.0, inplace=True)
    stream = rope_api._current_stream(p.device)
    figures = {
        "cukiln.rope": per_call_us(lambda: cukiln.rope(x, base=10000.0, inplace=True)),
        "rope without the foreign-array wrapper": per_call_us(
            lambda: rope_api.rope.__wrapped__(x, base=10000.0, inplace=True)),
        "plan-cache hit and pointer refill (_prepare)": per_call_us(
            lambda: rope_api._prepare(x, base=10000.0, inplace=True)),
        "launch alone (pack + cuLaunchKernel)": per_call_us(
            lambda: launch.launch(p.device, p.module, p.symbol, p.fmt, values, p.grid, p.block, stream)),
        "torch add_ (reference point)": per_call_us(lambda: x.add_(1.0)),
    }
    for name, us in figures.items():
        print(f"{name:48s} {us:6.2f} us/call")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**run_metadata("host overhead", "python benchmarks/host_overhead.py"),
                       "us_per_call": figures}, f, indent=1)


if __name__ == "__main__":
    main()
