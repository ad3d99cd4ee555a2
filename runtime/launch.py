"""Kernel launch: pack the parameter struct, make the device's context current, cuLaunchKernel.

Every kernel takes one struct by value; its fields are all 8 bytes, so one ``struct.pack_into`` into a
per-thread buffer fills it. cuLaunchKernel copies the parameters before it returns, so the buffer is
reused at once. Nothing here synchronizes.

A ``Kernel`` binds a function handle, its context and its launch shape once, so that a call is the pack,
one context check and the launch (cuda.bindings' compiled wrappers: calling libcuda through ctypes
measured slower, `cukiln bench overhead`).

A launch marked ``overlap_previous`` goes through cuLaunchKernelEx with programmatic stream
serialization (sm_90 on, every cukiln kernel: runtime/arch.py): the kernel may be scheduled before the
previous kernel in the stream has finished, and waits for that kernel's results itself
(griddepcontrol.wait at the top of every kernel, common.cuh). A launch with ``cluster`` > 1 (sm_90 on,
always with ``overlap_previous``) groups that many consecutive blocks along x into a thread-block cluster.
"""

from __future__ import annotations

import ctypes
import struct
import threading

from cuda.bindings import driver

from .driver import check, launch_config
from .loader import KERNELS

_MAX_PARAM_BYTES = 4096
_SUCCESS = driver.CUresult.CUDA_SUCCESS


class _Buffers(threading.local):
    """Per-thread scratch: the parameter struct and the pointer array cuLaunchKernel reads, and for
    programmatic launches each (kernel, stream)'s launch configuration (per thread, so that no other
    thread's call changes a configuration between its lookup and its launch)."""

    MAX_CACHED = 4096

    def __init__(self) -> None:
        self.params = ctypes.create_string_buffer(_MAX_PARAM_BYTES)
        self.pointers = (ctypes.c_void_p * 1)(ctypes.addressof(self.params))
        self.address = ctypes.addressof(self.pointers)
        self.configs: dict = {}  # (Kernel, stream handle) -> CUlaunchConfig for a programmatic launch

    def new_config(self, k: "Kernel", stream: int):
        if len(self.configs) >= self.MAX_CACHED:
            self.configs.clear()
        config = self.configs[k, stream] = launch_config(k.grid, k.block, k.shared, k.cluster)
        config.hStream = driver.CUstream(stream)
        return config


_BUFFERS = _Buffers()


class Kernel:
    """One kernel bound to one device and launch shape: resolved once, then launched per call with
    ``kernel(values, stream)`` (the struct's field values, the stream handle)."""

    __slots__ = ("symbol", "context", "context_id", "function", "grid", "block", "shared", "cluster", "packer",
                 "overlap_previous")

    def __init__(self, device: int, module: str, symbol: str, fmt: str, grid: tuple[int, int, int],
                 block: tuple[int, int, int], shared: int = 0, overlap_previous: bool = False,
                 cluster: int = 1) -> None:
        assert cluster == 1 or overlap_previous, "cluster launches go through cuLaunchKernelEx (sm_90 on)"
        self.symbol = symbol
        self.context, self.context_id = KERNELS.context(device)
        self.function = KERNELS.function(device, module, symbol, shared)
        self.grid, self.block, self.shared, self.cluster = grid, block, shared, cluster
        self.packer = struct.Struct(fmt)  # struct caches compiled formats itself
        self.overlap_previous = overlap_previous

    def __call__(self, values, stream: int) -> None:
        buffers = _BUFFERS
        self.packer.pack_into(buffers.params, 0, *values)
        current = driver.cuCtxGetCurrent()[1]
        switch = int(current) != self.context_id  # e.g. a tensor on another device than the thread's current one
        if switch:
            check(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        try:
            if self.overlap_previous:
                config = buffers.configs.get((self, stream)) or buffers.new_config(self, stream)
                (err,) = driver.cuLaunchKernelEx(config, self.function, buffers.address, 0)
            else:
                grid, block = self.grid, self.block
                (err,) = driver.cuLaunchKernel(self.function, grid[0], grid[1], grid[2], block[0], block[1],
                                               block[2], self.shared, stream, buffers.address, 0)
            if err != _SUCCESS:
                check((err,), f"cuLaunchKernel({self.symbol})")
        finally:
            if switch:
                driver.cuCtxSetCurrent(current)


class BoundKernels:
    """Owns every bound Kernel, one per (device, symbol, struct format, launch shape) (bounded like the plans)."""

    MAX_ENTRIES = 4096

    def __init__(self) -> None:
        self._kernels: dict[tuple, Kernel] = {}

    def get(self, device: int, module: str, symbol: str, fmt: str, grid: tuple[int, int, int],
            block: tuple[int, int, int], shared: int = 0, overlap_previous: bool = False, cluster: int = 1) -> Kernel:
        key = (device, symbol, fmt, grid, block, shared, overlap_previous, cluster)
        k = self._kernels.get(key)
        if k is None:
            if len(self._kernels) >= self.MAX_ENTRIES:
                self._kernels.clear()
            k = self._kernels[key] = Kernel(device, module, symbol, fmt, grid, block, shared, overlap_previous, cluster)
        return k


BOUND = BoundKernels()
kernel = BOUND.get  # the bound Kernel for these launch settings


def launch(device: int, module: str, symbol: str, fmt: str, values, grid: tuple[int, int, int],
           block: tuple[int, int, int], stream: int, shared: int = 0, overlap_previous: bool = False,
           cluster: int = 1) -> None:
    """Launch ``symbol`` of ``module`` on ``device`` with the struct ``values`` packed as ``fmt`` and
    ``shared`` bytes of dynamic shared memory (in clusters of ``cluster`` blocks along x)."""
    kernel(device, module, symbol, fmt, grid, block, shared, overlap_previous, cluster)(values, stream)
