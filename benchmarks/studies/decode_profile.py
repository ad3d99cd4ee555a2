"""Where a decode call's time goes (GPU machine): per-kernel device time (torch.profiler, CUPTI) of
cukiln.decode_attention and torch SDPA on the bench shapes, beside each call's CUDA-event time. The
difference between the call time and the sum of its kernels is the launch gap between them.

    python benchmarks/studies/decode_profile.py [--shapes 1x512,1x8192,...] [--out JSON]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict


def kernel_times_us(fn, calls: int = 40) -> dict:
    """Average device µs per call of every kernel ``fn`` launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name[:60]] += event.device_time
    return {name: t / calls for name, t in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="1x512,1x8192,1x32768,8x512,8x8192,32x2048,128x8192")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()


    import cukiln
    from cukiln.tools.decode import _inputs, kv_bytes, torch_sdpa
    from cukiln.tools.timing import median_ms, rotating_sets, run_metadata

    rows = []
    for shape in args.shapes.split(","):
        b, T = (int(v) for v in shape.split("x"))
        sets = rotating_sets(lambda: _inputs(b, T), kv_bytes(b, T))
        paths = {
            "cukiln": [lambda s=s: cukiln.decode_attention(*s, T) for s in sets],
            "sdpa": [lambda s=s: torch_sdpa(*s) for s in sets],
        }
        for name, calls in paths.items():
            index = iter(range(10**9))

            def rotate(calls=calls, index=index):
                calls[next(index) % len(calls)]()

            call_us = median_ms(calls) * 1e3
            kernels = kernel_times_us(rotate)
            rows.append({"batch": b, "T": T, "path": name, "call_us": call_us, "kernels_us": kernels})
            listed = "; ".join(f"{k} {v:.1f}" for k, v in sorted(kernels.items(), key=lambda kv: -kv[1]))
            print(f"b={b:<4d} T={T:<6d} {name:7s} call {call_us:7.1f} us | kernels {sum(kernels.values()):7.1f} us: "
                  f"{listed}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**run_metadata("decode profile", "python benchmarks/studies/decode_profile.py"), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
