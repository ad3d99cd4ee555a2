"""Kernel sweeps' launcher and command line: load sweep cubins (built apart from generated/), launch their
kernels raw."""

from __future__ import annotations

import argparse
import ctypes
import struct
from pathlib import Path


def load_functions(cubin: Path, symbols) -> dict:
    """symbol -> CUfunction from ``cubin``, loaded into device 0's primary context (made current)."""
    from cuda.bindings import driver

    from cukiln.loader import KERNELS, check

    ctx, _ = KERNELS.context(0)
    check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    module = check(driver.cuModuleLoadData(cubin.read_bytes()), "cuModuleLoadData")
    return {s: check(driver.cuModuleGetFunction(module, s.encode()), "cuModuleGetFunction") for s in symbols}


def allow_shared(fn, nbytes: int) -> None:
    """Opt ``fn`` in to ``nbytes`` of dynamic shared memory (needed above 48 KB)."""
    from cuda.bindings import driver

    from cukiln.loader import check

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(driver.cuFuncSetAttribute(fn, attr, nbytes), "cuFuncSetAttribute")


def launcher(fn, fmt: str, values, grid, block, shared: int, stream: int, overlap_previous: bool = False):
    """A zero-argument callable launching ``fn`` with its struct parameter packed once, here
    (``overlap_previous``: a programmatic launch, as cukiln.launch makes it)."""
    from cuda.bindings import driver

    params = ctypes.create_string_buffer(struct.pack(fmt, *values))
    pointers = (ctypes.c_void_p * 1)(ctypes.addressof(params))
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared
    config.hStream = driver.CUstream(stream)
    if overlap_previous:
        attribute = driver.CUlaunchAttribute()
        attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attribute.value.programmaticStreamSerializationAllowed = 1
        config.attrs = [attribute]
        config.numAttrs = 1

    def call() -> None:
        (err,) = driver.cuLaunchKernelEx(config, fn, ctypes.addressof(pointers), 0)
        assert err == driver.CUresult.CUDA_SUCCESS, err

    call.keep = (params, pointers, config)  # alive as long as the callable
    return call


def sweep_main(argv: list[str], doc: str, build, run) -> int:
    """The sweeps' two-step command line: `build DIR` on the CPU machine, `run DIR [--out JSON]` on the GPU."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("build", "run"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", help="run only these cases, e.g. 1x8192,8x512 (sweeps that take it)")
    args = parser.parse_args(argv)
    if args.step == "build":
        build(args.dir)
    elif args.cases:
        run(args.dir, args.out, cases=[tuple(int(n) for n in c.split("x")) for c in args.cases.split(",")])
    else:
        run(args.dir, args.out)
    return 0
