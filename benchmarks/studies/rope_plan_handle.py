"""A plan handle for the torch ops, measured before building it: cukiln::rope_ as it is (x and 22 more
arguments through the dispatcher) beside a study op that takes x, the op's tensor arguments (None here) and one
integer naming the call's static arguments (base, scale, layout, ...), registered when the handle is made, and a
second study op for calls with no tensor but x, whose handle names run_rope's whole argument list (nothing to merge
per call). All reach the same kernel path (rope_torch.run_rope). Eager through the dispatcher and compiled
(fullgraph), on CPU tensors with the device stubbed as call_path_sim.py stubs it (the kernel's
parameters packed, nothing launched); best of 7 rounds, µs a call.

Only the call's cost is measured: the handle is made before torch.compile here, where the product would make it
while tracing (a compile-time constant of the graph).

Run from the repository root: PYTHONPATH=. python benchmarks/studies/rope_plan_handle.py
"""

from __future__ import annotations

import timeit

import torch

import cukiln.torch as ct
from cukiln import rope_torch
from benchmarks.studies.call_path_sim import install_stubs

TENSORS = ("freqs", "cos", "sin", "cos_sin_cache", "inv_freq", "positions", "offsets_tensor", "cu_seqlens")
STATICS = tuple(name for name in rope_torch.OP_ARGUMENTS if name not in TENSORS)
HANDLES: list[tuple] = []  # handle -> the static arguments, in STATICS' order


def make_handle(**statics) -> int:
    HANDLES.append(tuple(statics[name] for name in STATICS))
    return len(HANDLES) - 1


def _kernel(x, *tensors_and_handle):
    """The handle's static arguments merged with the call's tensors in the op's order."""
    *tensors, handle = tensors_and_handle
    values = dict(zip(TENSORS, tensors)) | dict(zip(STATICS, HANDLES[handle]))
    rope_torch._rope_inplace_kernel(x, *(values[name] for name in rope_torch.OP_ARGUMENTS))


# handle -> run_rope's arguments after x, whole (a call with no tensor argument but x: nothing to merge)
WHOLE: list[tuple] = []


def _whole_kernel(x, handle):
    rope_torch.run_rope(x, *WHOLE[handle], True, x)


def main() -> None:
    install_stubs()
    library = torch.library.Library("rope_plan_handle", "DEF")
    library.define("rope_h_(Tensor(a!) x, " + ", ".join(f"Tensor? {n}" for n in TENSORS) + ", int handle) -> ()")
    library.impl("rope_h_", _kernel, "CompositeExplicitAutograd")
    torch.library.register_fake("rope_plan_handle::rope_h_", lambda x, *rest: None, lib=library)
    library.define("rope_w_(Tensor(a!) x, int handle) -> ()")
    library.impl("rope_w_", _whole_kernel, "CompositeExplicitAutograd")
    torch.library.register_fake("rope_plan_handle::rope_w_", lambda x, handle: None, lib=library)
    rope_h_ = torch.ops.rope_plan_handle.rope_h_.default
    rope_w_ = torch.ops.rope_plan_handle.rope_w_.default

    x = torch.randn(1, 1, 8, 64, dtype=torch.bfloat16)
    full = (x, *rope_torch._op_args(None, None, None, None, None, 10000.0, 1.0, 1.0, "sbhd", False, None, 0, None,
                                     None, False, None, None, 1, 0, None, False))
    named = dict(zip(rope_torch.OP_ARGUMENTS, full[1:]))
    handle = make_handle(**{name: named[name] for name in STATICS})
    WHOLE.append(rope_torch._run_args(full[1:]))  # through backward, as _rope_inplace_kernel passes them
    whole = len(WHOLE) - 1
    nones = (None,) * len(TENSORS)
    rope_ = torch.ops.cukiln.rope_.default
    paths = {
        "cukiln.torch.rope eager (no dispatcher)": lambda: ct.rope(x, base=10000.0, inplace=True),
        f"cukiln::rope_ through the dispatcher ({len(full)} arguments)": lambda: rope_(*full),
        f"handle op through the dispatcher ({len(TENSORS) + 2} arguments)": lambda: rope_h_(x, *nones, handle),
        "whole-handle op through the dispatcher (2 arguments)": lambda: rope_w_(x, whole),
        "compiled: cukiln.torch.rope": torch.compile(lambda t: ct.rope(t, base=10000.0, inplace=True),
                                                     fullgraph=True),
        "compiled: the handle op": torch.compile(lambda t: rope_h_(t, *nones, handle), fullgraph=True),
        "compiled: the whole-handle op": torch.compile(lambda t: rope_w_(t, whole), fullgraph=True),
    }
    print(f"torch {torch.__version__}, CPU, device stubbed; µs a call (best of 7 rounds)")
    for name, fn in paths.items():
        call = (lambda fn=fn: fn(x)) if name.startswith("compiled") else fn
        call()
        number = 3000 if name.startswith("compiled") else 20000
        print(f"{min(timeit.repeat(call, number=number, repeat=7)) / number * 1e6:8.2f}  {name}")


if __name__ == "__main__":
    main()
