"""cukiln.torch: the kernels as torch.library ops, for autograd, torch.compile and CUDA graphs.

    cukiln.torch.rope(x, ...)               same signature as cukiln.rope; differentiable in x
    cukiln.torch.decode_attention(q, ...)   same signature as cukiln.decode_attention

Importing this module registers every family's ops (the runtime modules named in the generated families
table): ``cukiln::rope`` (out of place), ``cukiln::rope_`` (in place, declared as mutating x) and
``cukiln::decode_attention`` (returns the output and the log-sum-exp). Each has a fake (meta)
implementation, so torch.compile traces them without running them. Each wrapper here is one node of the graph
torch.compile makes (torch_support.one_graph_node): its Python runs when the graph is traced, where it calls the op
specialized to the call's constants (cukiln.specialize), and a compiled call guards on its own arguments alone.
Gradients: rope's backward is cukiln's backward kernel on the incoming gradient (the exact vector-Jacobian
product); angle tables, positions, offsets and cu_seqlens get none. ``cukiln.torch.rope(..., inplace=True)`` is
differentiable too (eager: the kernel in place, marked as such for autograd; traced: the out-of-place op and a copy
into x), while the op ``cukiln::rope_`` and decode attention are not: given a tensor that requires grad (grad mode
on), they raise rather than return a result that autograd would silently treat as a constant.
Arguments that take an int or a tensor in cukiln (offsets, kv_lens, kv_start) travel as two op arguments.

With the native hot path (cukiln.native: the ops' per-call work in C++, built on first use) an eager call that
needs no gradient (a plain CUDA tensor, nothing tracing, nothing requiring grad) goes straight into the op's C++
plan cache, as the public function's does; every other call goes through the ops, and one that needs rope's
gradient reaches its autograd.Function, which calls the backward kernel. Without it, an eager call (a plain tensor,
no torch.compile, functorch transform or dispatch mode watching) runs the kernels from Python directly, and every
other call goes through the ops, whose autograd kernels again run the kernels directly when the call is eager (see
`cukiln bench overhead`).
"""

from __future__ import annotations

import importlib

from cukiln.generated.families import TORCH_OPS

__all__: list[str] = []
for _name in TORCH_OPS:
    _module = importlib.import_module(f"cukiln.{_name}")
    for _public in _module.__all__:
        globals()[_public] = getattr(_module, _public)
        __all__.append(_public)
del _name, _module, _public
