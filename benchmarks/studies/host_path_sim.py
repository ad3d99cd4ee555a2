"""The Python side of a `cukiln.rope` call, timed on any machine (no GPU needed).

GPU hosts are noisy (torch's own `add_` varies 7-11 µs between machines and rounds), too noisy to show a
change of a microsecond in the call path. This script runs the real call path on CPU tensors with the
three things that need a GPU replaced: planning returns a made-up plan (a RopePlan of 14 parameters with
the bound kernel already made), the driver's `cuCtxGetCurrent` / `cuLaunchKernelEx` are Python stubs
(about 0.05 µs each, where the real calls take 0.2 and 3-5 µs) and torch's current-stream query returns 0.
What it times is everything else: argument binding, the plan-cache key, pointer refill, the struct pack,
the launch-configuration lookup, the autograd wrapper of `cukiln.torch.rope` and the ops' dispatcher crossing:

    python benchmarks/studies/host_path_sim.py        # µs per call, best of 7 rounds of 20 000 calls
"""

from __future__ import annotations

import struct
import timeit
import types

import torch

import cukiln
import cukiln.torch as ct
from cukiln import launch, rope_api
from cukiln.rope_plan import RopePlan

CALLS, ROUNDS = 20_000, 7
FIELDS = 14


class _StubDriver:
    """The cuda.bindings driver calls a launch makes, answering as on success."""

    class CUresult:
        CUDA_SUCCESS = 0

    CONTEXT = 1

    @staticmethod
    def cuCtxGetCurrent():
        return 0, _StubDriver.CONTEXT

    @staticmethod
    def cuLaunchKernelEx(config, function, params, extra):
        return (0,)

    @staticmethod
    def cuCtxSetCurrent(context):
        return (0,)

    @staticmethod
    def CUstream(handle):
        return handle


def _stub_kernel() -> launch.Kernel:
    k = object.__new__(launch.Kernel)
    k.symbol, k.context, k.context_id, k.function = "stub", _StubDriver.CONTEXT, _StubDriver.CONTEXT, None
    k.grid, k.block, k.shared, k.cluster, k.overlap_previous = (1, 1, 1), (32, 1, 1), 0, 1, True
    k.packer = struct.Struct("<" + "q" * FIELDS)
    return k


def install_stubs() -> None:
    """Swap the GPU-bound pieces of the rope call path for stubs (this process only)."""
    launch.driver = _StubDriver
    launch._SUCCESS = 0
    launch.launch_config = lambda grid, block, shared, cluster=1: types.SimpleNamespace(hStream=None)
    plan = RopePlan(key=("stub",), module="stub", symbol="stub", fmt="<" + "q" * FIELDS, values=tuple(range(FIELDS)),
                    grid=(1, 1, 1), block=(32, 1, 1), device=-1, overlap_previous=True)
    kernel = _stub_kernel()

    def plan_and_describe(args, *, fresh, inplace, **_):
        # pointer slots for x, out and a freqs table; out rechecked against x and freqs unless fresh or x
        spans = ((0, 256), (0, 256), (0, 256)) + (None,) * 6
        checks = () if fresh or inplace else tuple(i for i in (0, 2) if args[i] is not None)
        cached = rope_api._CachedPlan(plan, ((0, 0), (1, 1), (2, 2)), spans, checks)
        cached.kernel = kernel
        return cached

    rope_api._plan_and_describe = plan_and_describe
    rope_api.PLANS.clear()
    real = torch
    rope_api._torch = types.SimpleNamespace(
        Tensor=real.Tensor, empty_like=real.empty_like, int32=real.int32,
        _C=types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0,
                                _increment_version=real._C._increment_version))


def paths() -> dict:
    x = torch.randn(1, 1, 1, 64)
    freqs = torch.rand(1, 64)
    out = torch.empty_like(x)
    x_grad = torch.randn(1, 1, 1, 64, requires_grad=True)
    op_args = (None, None, None, None, 10000.0, 1.0, "sbhd", False, None, None, None, None, None, 1, 0, None, False)
    return {
        "cukiln.rope (in place, base)": lambda: cukiln.rope(x, base=10000.0, inplace=True),
        "cukiln.rope (out=, freqs)": lambda: cukiln.rope(x, freqs=freqs, out=out),
        "cukiln.rope (allocates out, freqs)": lambda: cukiln.rope(x, freqs=freqs),
        "cukiln.torch.rope (eager, in place, base)": lambda: ct.rope(x, base=10000.0, inplace=True),
        "cukiln.torch.rope (eager, allocates out, freqs)": lambda: ct.rope(x, freqs=freqs),
        "cukiln.torch.rope (x requires grad: autograd)": lambda: ct.rope(x_grad, base=10000.0),
        "op cukiln::rope_ through the dispatcher (in place)": lambda: torch.ops.cukiln.rope_(x, *op_args),
        "op cukiln::rope through the dispatcher (allocates)": lambda: torch.ops.cukiln.rope(x, *op_args),
        "op cukiln::rope, x requires grad": lambda: torch.ops.cukiln.rope(x_grad, *op_args),
        "torch: x.add_(1.0) (CPU tensor)": lambda: x.add_(1.0),
        "torch.empty_like (CPU tensor)": lambda: torch.empty_like(x),
    }


def main() -> None:
    install_stubs()
    for name, fn in paths().items():
        fn()
        best = min(timeit.repeat(fn, number=CALLS, repeat=ROUNDS)) / CALLS * 1e6
        print(f"{name:50s} {best:6.2f} us")


if __name__ == "__main__":
    main()
