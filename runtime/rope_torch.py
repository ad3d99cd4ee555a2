"""RoPE as torch ops: ``cukiln::rope`` (out of place, differentiable in x), ``cukiln::rope_`` (in place, declared
as mutating x), ``cukiln::rope_qk`` (q and k out of place, differentiable in both) and ``cukiln::rope_qk_`` (in
place, declared as mutating q and k); ``rope`` and ``rope_qk`` are cukiln.torch.rope and cukiln.torch.rope_qk.

The ops, their schemas and wrappers come from rope_api's schemas (runtime/torch_support.register); what is RoPE's
own is here: the fake kernels and autograd. The backward is the same rotation with the direction flipped (the exact
vector-Jacobian product), by the backward kernel; angle tables, positions, offsets and cu_seqlens get no gradient.
``cukiln.torch.rope(..., inplace=True)`` is differentiable too (eager: the kernel in place, marked as such for
autograd; traced: the out-of-place op and a copy into x), while the op ``cukiln::rope_`` is not: given a tensor
that requires grad (grad mode on), it raises rather than return a result autograd would treat as a constant.
"""

from __future__ import annotations

import torch

from .calls import RUNTIMES, public
from .specialize import call as specialized_call
from .tensors import refuse_untracked_gradients
from .torch_ops import torch_call
from .torch_support import eager, wants_grad
from .torch_ops import register as register_ops

def _refuse_leaf_in_place(x: torch.Tensor) -> None:
    """Torch refuses in-place writes to a leaf that requires grad (or a view of one): refuse them too, before
    the kernel runs (autograd.Function's own check comes after its forward has written x)."""
    base = x._base
    if x.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
        raise RuntimeError("x: a leaf Variable that requires grad (or a view of one) cannot be rotated in place, "
                           "as torch refuses any in-place operation on one; use inplace=False")


class _RopeGrad(torch.autograd.Function):
    """Autograd of rope (x) and rope_qk (q, k): ``run(runtime, args, inplace)`` on the op's arguments ``args`` with
    the rotated tensors first; the backward runs it again on the incoming gradients with ``backward`` flipped, out of
    place. Only the rotated tensors get gradients."""

    @staticmethod
    def forward(ctx, run, runtime, inplace: bool, args: tuple, *tensors):
        result = run(runtime, tensors + args[len(tensors):], inplace)  # first: it validates every argument
        ctx.run, ctx.runtime, ctx.args = run, runtime, args[len(tensors):]
        # The tensor arguments (tables, positions, offsets) are saved for backward too, for the version check on
        # unpacking: a backward after one of them was changed in place raises.
        ctx.save_for_backward(*[a for a in ctx.args if isinstance(a, torch.Tensor)])
        if inplace:
            ctx.mark_dirty(*tensors)
        return result

    @staticmethod
    def backward(ctx, *grads):
        ctx.saved_tensors  # noqa: B018 (unpacked for the version check alone; ctx.args holds them too)
        args = list(grads + ctx.args)
        at = ctx.runtime.index["backward"]
        args[at] = not args[at]
        result = ctx.run(ctx.runtime, tuple(args), False)
        return (None, None, None, None) + (result if isinstance(result, tuple) else (result,))


def _rotated(runtime) -> int:
    return 2 if runtime.schema.name == "rope_qk" else 1


def _run_eager(runtime, args: tuple, inplace: bool):
    """The rotation, eagerly (inside _RopeGrad's forward or backward, where grad mode is off): through the native
    hot path's plans where it serves the op, as a public call would, else the Python path."""
    form = runtime.form((inplace,), (False,))
    callers = runtime.native_callers
    if callers and args[0].is_cuda:
        result = callers[form.variant](*args)
        if result is not NotImplemented:  # a backward that builds a graph: the tensors require grad, grad mode on
            return public(runtime, form, result, args)
    return public(runtime, form, runtime.run(args, form), args)


def _rope_op(*args):
    return torch.ops.cukiln.rope.default(*args)


def _rope_qk_op(*args):
    return torch.ops.cukiln.rope_qk.default(*args)


def _run_op(runtime, args: tuple, inplace: bool):
    """The out-of-place op through the dispatcher (traced: a node of the graph; its backward too)."""
    return (_rope_qk_op if runtime.schema.name == "rope_qk" else _rope_op)(*args)


def _autograd(runtime, op_name: str):
    """The Autograd kernel of the out-of-place op: a call needing a gradient goes through _RopeGrad, whose backward
    calls the op again; an eager one without runs the kernel; a traced one redispatches."""
    n = _rotated(runtime)
    form = runtime.schema.op_forms()[op_name]

    def autograd(*args):
        args = runtime.complete(args)
        if any(wants_grad(t) for t in args[:n]):
            return _RopeGrad.apply(_run_op, runtime, False, args, *args[:n])
        if eager(args[0]):
            return runtime.run(args, form)
        with torch._C._AutoDispatchBelowAutograd():
            return getattr(torch.ops.cukiln, op_name).default(*args)

    return autograd


def _inplace_autograd(runtime, op_name: str, names: tuple[str, ...]):
    """The Autograd kernel of the in-place op: refuses rotated tensors that require grad."""
    n = _rotated(runtime)
    form = runtime.schema.op_forms()[op_name]
    hint = f"cukiln.torch.{runtime.schema.name}({', '.join(names)}, ..., inplace=True)"

    def autograd(*args):
        args = runtime.complete(args)
        if any(t.requires_grad for t in args[:n]):
            refuse_untracked_gradients(f"cukiln::{op_name}", tuple(zip(names, args[:n])), hint)
        if eager(args[0]):
            return runtime.run(args, form)
        with torch._C._AutoDispatchBelowAutograd():
            return getattr(torch.ops.cukiln, op_name).default(*args)

    return autograd


def _hook(runtime):
    """cukiln.torch's calls that need RoPE's own handling (the wrapper's hook): rope_qk with k None (rope on q), and
    calls needing a gradient (eager: _RopeGrad; traced in place: the differentiable op and a copy); NotImplemented
    for the rest."""
    n = _rotated(runtime)
    schema = runtime.schema

    def hook(args: tuple, form):
        if n == 2 and args[1] is None:  # q alone, as cukiln.torch.rope
            rope = RUNTIMES["rope"]
            rope.torch_wrapper()  # rope's ops registered
            rope_args, rope_form = args[:1] + args[2:], rope.form((form.inplace,), (False,))
            hooked = _HOOKS["rope"](rope_args, rope_form)
            return (hooked if hooked is not NotImplemented else torch_call(rope, rope_args, rope_form, args[0])), None
        rotated = args[:n]
        if not any(wants_grad(t) for t in rotated):
            return NotImplemented
        if eager(args[0]):
            if form.inplace:
                for t in rotated:
                    if t.requires_grad:
                        _refuse_leaf_in_place(t)
            return _RopeGrad.apply(_run_eager, runtime, form.inplace, args, *rotated)
        if form.inplace:  # traced: the differentiable op, and copies that autograd sees as in place
            results = specialized_call(schema.name, args)
            results = results if isinstance(results, tuple) else (results,)
            copied = tuple(t.copy_(r) for t, r in zip(rotated, results))
            return copied if n == 2 else copied[0]
        return NotImplemented

    return hook


def _fake_rope(x, *args):
    return torch.empty_like(x)


def _fake_rope_qk(q, k, *args):
    return torch.empty_like(q), torch.empty_like(k)


def _nothing(*args):
    return None


_HOOKS: dict = {}  # op name -> its hook, once registered


def register(runtime):
    """rope's or rope_qk's torch ops, with RoPE's fakes, autograd and hook: cukiln.torch's wrapper."""
    name, inplace = runtime.schema.name, runtime.schema.inplace_op
    rotated = ("q", "k") if name == "rope_qk" else ("x",)
    hook = _HOOKS[name] = _hook(runtime)
    fake = _fake_rope_qk if name == "rope_qk" else _fake_rope
    return register_ops(runtime, fakes={name: fake, inplace: _nothing},
                        autograd={name: _autograd(runtime, name), inplace: _inplace_autograd(runtime, inplace, rotated)},
                        hook=hook)
