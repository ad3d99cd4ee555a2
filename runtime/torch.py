"""cukiln.torch: the kernels as torch.library ops, for autograd, torch.compile and CUDA graphs.

    cukiln.torch.rope(x, ...)               same signature as cukiln.rope; differentiable in x
    cukiln.torch.decode_attention(q, ...)   same signature as cukiln.decode_attention

Importing this module registers every op's torch ops (each op's runtime names the module that does:
calls.OpRuntime.torch_module): ``cukiln::rope`` (out of place), ``cukiln::rope_`` (in place, declared as mutating x),
``cukiln::decode_attention`` (returns the output and the log-sum-exp), ... Each has a fake (meta) implementation, so
torch.compile traces them without running them. Each wrapper here is one node of the graph torch.compile makes
(torch_support.one_graph_node): its Python runs when the graph is traced, where it calls the op specialized to the
call's constants (cukiln.specialize), and a compiled call guards on its own arguments alone. Its signature is the
public function's (less ``stream``; the outputs a caller gives, and ``inplace`` where the op has no in-place torch
op, are refused), built from the op's schema (runtime/binder.py).
Gradients: rope's backward is cukiln's backward kernel on the incoming gradient (the exact vector-Jacobian
product); angle tables, positions, offsets and cu_seqlens get none. ``cukiln.torch.rope(..., inplace=True)`` is
differentiable too (eager: the kernel in place, marked as such for autograd; traced: the out-of-place op and a copy
into x), while the op ``cukiln::rope_`` and the other ops are not: given a tensor that requires grad (grad mode on),
they raise rather than return a result that autograd would silently treat as a constant.
Arguments that take an int or a tensor in cukiln (offsets, kv_lens, kv_start) travel as two op arguments.

With the native hot path (cukiln.native: the ops' per-call work in C++) an eager call that needs no gradient (a
plain CUDA tensor, nothing tracing, nothing requiring grad) goes straight into the op's C++ plan cache, as the public
function's does; every other call goes through the ops, and one that needs rope's gradient reaches its
autograd.Function, which calls the backward kernel. Without it, an eager call runs the op's Python path directly,
and every other call goes through the ops.
"""

from __future__ import annotations

import importlib

from cukiln.generated.families import API

from .calls import RUNTIMES

__all__: list[str] = []
for _name, _module in API.items():
    importlib.import_module(f"cukiln.{_module}")
    if _name in RUNTIMES and RUNTIMES[_name].torch_module is not None:
        globals()[_name] = RUNTIMES[_name].torch_wrapper()
        __all__.append(_name)
del _name, _module
