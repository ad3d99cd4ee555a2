"""Where the host time of one bound kernel launch goes, step by step (GPU machine).

Times the pieces of launch.Kernel's call for the in-place rope plan of `cukiln bench overhead` (the struct
pack, cuCtxGetCurrent, torch's current device, the launch-config lookup, cuLaunchKernelEx with a
ready config, plain cuLaunchKernel, the whole bound call), then the whole `cukiln.rope` (the
three calls of `cukiln bench overhead`) and torch's `add_`, each two ways (microseconds per call, best of 5 rounds):

- ``loop``: 20 000 calls, then one synchronize (what `cukiln bench overhead` reports);
- ``issue``: 200 calls into an idle stream, timed without synchronizing: the host's own cost, since
  200 launches do not fill the launch queue, so no call waits for the GPU.

    python benchmarks/studies/launch_parts.py
"""

from __future__ import annotations

import ctypes
import time

import torch

from cuda.bindings import driver

import cukiln
from cukiln import rope_api
from cukiln.launch import _BUFFERS, kernel

CALLS, ISSUE_CALLS, ROUNDS = 20_000, 200, 5


def loop_us(fn) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - started) / CALLS * 1e6)
    return best


def issue_us(fn) -> float:
    best = float("inf")
    for _ in range(ROUNDS * 10):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(ISSUE_CALLS):
            fn()
        best = min(best, (time.perf_counter() - started) / ISSUE_CALLS * 1e6)
    torch.cuda.synchronize()
    return best


def ctypes_launch_ex(k, stream: int, params_address: int, programmatic: bool):
    """cuLaunchKernelEx called through a ctypes prototype that keeps the GIL (no cuda.bindings wrapper)."""
    err, address, _ = driver.cuGetProcAddress(b"cuLaunchKernelEx", 12000,
                                              driver.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
    assert err == driver.CUresult.CUDA_SUCCESS and address
    prototype = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    launch_ex = prototype(int(address))

    class Attribute(ctypes.Structure):
        _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_ubyte * 64)]

    class Config(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                    ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(Attribute)), ("num_attrs", ctypes.c_uint)]

    attribute = Attribute()
    attribute.id = int(driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
    attribute.value[0] = 1
    config = Config((ctypes.c_uint * 3)(*k.grid), (ctypes.c_uint * 3)(*k.block), k.shared, stream,
                    ctypes.pointer(attribute), 1 if programmatic else 0)
    config_address, function = ctypes.addressof(config), int(k.function)

    def call():
        config.stream = stream
        err = launch_ex(config_address, function, params_address, None)
        assert err == 0, err

    call.keep = (attribute, config)
    return call


def main() -> None:
    x = torch.randn(1, 1, 1, 64, device="cuda")
    freqs = torch.rand(1, 64, device="cuda")
    out = torch.empty_like(x)
    cached, values, _, _, _ = rope_api.prepare(x, None, base=10000.0, inplace=True)
    p = cached.plan
    k = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, 0, p.overlap_previous)
    stream = torch.cuda.current_stream().cuda_stream
    buffers = _BUFFERS
    config = buffers.configs.get((k, stream)) or buffers.new_config(k, stream)
    grid, block = k.grid, k.block
    handle = driver.CUstream(stream)
    k.packer.pack_into(buffers.params, 0, *values)
    plain_config = driver.CUlaunchConfig()
    plain_config.gridDimX, plain_config.gridDimY, plain_config.gridDimZ = grid
    plain_config.blockDimX, plain_config.blockDimY, plain_config.blockDimZ = block
    plain_config.hStream = handle
    parts = {
        "struct pack of the parameters": lambda: k.packer.pack_into(buffers.params, 0, *values),
        "cuCtxGetCurrent + int()": lambda: int(driver.cuCtxGetCurrent()[1]),
        "torch current device": torch._C._cuda_getDevice,
        "launch config lookup": lambda: buffers.configs.get((k, stream)) or buffers.new_config(k, stream),
        "setting config.hStream alone": lambda: setattr(config, "hStream", handle),
        "current raw stream (torch)": lambda: torch._C._cuda_getCurrentRawStream(0),
        "plan-cache hit and pointer refill": lambda: rope_api.prepare(x, None, base=10000.0, inplace=True),
    }
    launches = {
        "cuLaunchKernelEx, programmatic": lambda: driver.cuLaunchKernelEx(config, k.function, buffers.address, 0),
        "cuLaunchKernelEx, not programmatic": lambda: driver.cuLaunchKernelEx(plain_config, k.function,
                                                                              buffers.address, 0),
        "cuLaunchKernel": lambda: driver.cuLaunchKernel(k.function, grid[0], grid[1], grid[2], block[0], block[1],
                                                        block[2], 0, stream, buffers.address, 0),
        "ctypes cuLaunchKernelEx, programmatic": ctypes_launch_ex(k, stream, buffers.address, True),
        "ctypes cuLaunchKernelEx, not programmatic": ctypes_launch_ex(k, stream, buffers.address, False),
        "bound Kernel call (pack, context, launch)": lambda: k(values, stream),
        "cukiln.rope (in place, base)": lambda: cukiln.rope(x, base=10000.0, inplace=True),
        "cukiln.rope (out=, freqs)": lambda: cukiln.rope(x, freqs=freqs, out=out),
        "cukiln.rope (allocates out, freqs)": lambda: cukiln.rope(x, freqs=freqs),
        "torch.empty_like": lambda: torch.empty_like(x),
        "torch: x.add_(1.0)": lambda: x.add_(1.0),
    }
    for fn in (*parts.values(), *launches.values()):
        for _ in range(1000):
            fn()
    torch.cuda.synchronize()
    print(f"{'':44s} {'issue':>7s}")
    for name, fn in parts.items():
        print(f"{name:44s} {issue_us(fn):7.2f} us")
    print(f"{'':44s} {'issue':>7s} {'loop':>7s}")
    for name, fn in launches.items():
        print(f"{name:44s} {issue_us(fn):7.2f} {loop_us(fn):7.2f} us")


if __name__ == "__main__":
    main()
