"""Kernel launch: pack the parameter struct, make the device's context current, cuLaunchKernel.

Every kernel takes one struct by value; its fields are all 8 bytes, so one ``struct.pack_into`` into a
per-thread buffer fills it. cuLaunchKernel copies the parameters before it returns, so the buffer is
reused at once. Nothing here synchronizes.

A launch marked ``overlap_previous`` goes through cuLaunchKernelEx with programmatic stream
serialization (sm_90 on): the kernel may be scheduled before the previous kernel in the stream has
finished, and waits for that kernel's results itself (griddepcontrol.wait in the decode combine kernel).
"""

from __future__ import annotations

import ctypes
import struct
import threading

from cuda.bindings import driver

from .loader import KERNELS, check

_MAX_PARAM_BYTES = 4096
_SUCCESS = driver.CUresult.CUDA_SUCCESS


class _Buffers(threading.local):
    def __init__(self) -> None:
        self.params = ctypes.create_string_buffer(_MAX_PARAM_BYTES)
        self.pointers = (ctypes.c_void_p * 1)(ctypes.addressof(self.params))
        self.address = ctypes.addressof(self.pointers)
        self._config = None

    @property
    def overlapping_config(self):
        """A launch configuration carrying the programmatic-serialization attribute (built once a thread)."""
        if self._config is None:
            attribute = driver.CUlaunchAttribute()
            attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attribute.value.programmaticStreamSerializationAllowed = 1
            self._config = driver.CUlaunchConfig()
            self._config.attrs = [attribute]
            self._config.numAttrs = 1
        return self._config


_BUFFERS = _Buffers()
_STRUCTS: dict[str, struct.Struct] = {}


def launch(device: int, module: str, symbol: str, fmt: str, values, grid: tuple[int, int, int],
           block: tuple[int, int, int], stream: int, shared: int = 0, overlap_previous: bool = False) -> None:
    """Launch ``symbol`` of ``module`` on ``device`` with the struct ``values`` packed as ``fmt`` and
    ``shared`` bytes of dynamic shared memory."""
    ctx, ctx_id = KERNELS.context(device)
    current = driver.cuCtxGetCurrent()[1]
    switch = int(current) != ctx_id
    if switch:  # e.g. a tensor on another device than the thread's current one
        check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    try:
        fn = KERNELS.function(device, module, symbol, shared)
        packer = _STRUCTS.get(fmt)
        if packer is None:
            packer = _STRUCTS[fmt] = struct.Struct(fmt)
        buffers = _BUFFERS
        packer.pack_into(buffers.params, 0, *values)
        if overlap_previous:
            config = buffers.overlapping_config
            config.gridDimX, config.gridDimY, config.gridDimZ = grid
            config.blockDimX, config.blockDimY, config.blockDimZ = block
            config.sharedMemBytes = shared
            config.hStream = driver.CUstream(stream)
            (err,) = driver.cuLaunchKernelEx(config, fn, buffers.address, 0)
        else:
            (err,) = driver.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared,
                                           stream, buffers.address, 0)
        if err != _SUCCESS:
            check((err,), f"cuLaunchKernel({symbol})")
    finally:
        if switch:
            driver.cuCtxSetCurrent(current)
