"""Where the host time of one bound kernel launch goes, step by step (GPU machine).

Times, over 20 000 calls each (best of 5 rounds, microseconds per call), the pieces of launch.Kernel's call
for the in-place rope plan of `cukiln bench overhead`: the struct pack, cuCtxGetCurrent, torch's current
device, the launch-config stream update, cuLaunchKernelEx with a ready config, plain cuLaunchKernel, and the
whole bound call:

    python benchmarks/launch_parts.py
"""

from __future__ import annotations

import time

import torch

from cuda.bindings import driver

from cukiln import rope_api
from cukiln.launch import _BUFFERS, kernel

CALLS, ROUNDS = 20_000, 5


def per_call_us(fn) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - started) / CALLS * 1e6)
    return best


def main() -> None:
    x = torch.randn(1, 1, 1, 64, device="cuda")
    cached, values, _, _ = rope_api._prepare(x, base=10000.0, inplace=True)
    p = cached.plan
    k = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, 0, p.overlap_previous)
    stream = torch.cuda.current_stream().cuda_stream
    buffers = _BUFFERS
    config = buffers.config(k, stream)
    grid, block = k.grid, k.block
    handle = driver.CUstream(stream)
    parts = {
        "struct pack of the parameters": lambda: k.packer.pack_into(buffers.params, 0, *values),
        "cuCtxGetCurrent + int()": lambda: int(driver.cuCtxGetCurrent()[1]),
        "torch current device": torch._C._cuda_getDevice,
        "launch config lookup + stream set": lambda: buffers.config(k, stream),
        "setting config.hStream alone": lambda: setattr(config, "hStream", handle),
        "cuLaunchKernelEx, config ready": lambda: driver.cuLaunchKernelEx(config, k.function, buffers.address, 0),
        "cuLaunchKernel": lambda: driver.cuLaunchKernel(k.function, grid[0], grid[1], grid[2], block[0], block[1],
                                                        block[2], 0, stream, buffers.address, 0),
        "bound Kernel call (all of the above)": lambda: k(values, stream),
        "current raw stream (torch)": lambda: torch._C._cuda_getCurrentRawStream(0),
    }
    for fn in parts.values():
        for _ in range(1000):
            fn()
    torch.cuda.synchronize()
    for name, fn in parts.items():
        print(f"{name:40s} {per_call_us(fn):6.2f} us")


if __name__ == "__main__":
    main()
