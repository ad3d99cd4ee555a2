"""RoPE as torch ops: ``cukiln::rope`` (out of place, differentiable in x), ``cukiln::rope_`` (in place, declared
as mutating x), ``cukiln::rope_qk`` (q and k out of place, differentiable in both) and ``cukiln::rope_qk_`` (in
place, declared as mutating q and k), with fake kernels for torch.compile; ``rope`` and ``rope_qk`` are
cukiln.torch.rope and cukiln.torch.rope_qk.

The ops take cukiln.rope's arguments (rope_api.ARGUMENTS, the one declaration) less ``inplace``, ``out`` and
``stream``, with ``offsets`` (an int or a tensor) split into ``offsets_tensor`` and ``offset``; their schema and
the argument positions below are derived from it.
"""

from __future__ import annotations

import torch

from . import rope_api
from .rope_api import ARGUMENTS, run_rope, run_rope_qk
from .specialize import call as specialized_call
from .tensors import refuse_untracked_gradients
from .torch_support import (LIBRARY, NATIVE_HANDLES, PUBLIC_CALLS, direct, eager, fake, implement, one_graph_node,
                            untracked, wants_grad)

__all__ = ["rope", "rope_qk"]

# The op's arguments after x, each with its schema type (tests/runtime/test_signatures.py checks the names
# against rope_api.ARGUMENTS).
OP_TYPES = {"freqs": "Tensor?", "cos": "Tensor?", "sin": "Tensor?", "cos_sin_cache": "Tensor?",
            "inv_freq": "Tensor?", "base": "float?", "scale": "float", "mscale": "float", "layout": "str",
            "interleaved": "bool", "rotary_dim": "int?", "rotary_offset": "int", "positions": "Tensor?",
            "mrope_section": "int[]?", "mrope_interleaved": "bool", "offsets_tensor": "Tensor?", "offset": "SymInt?",
            "cu_seqlens": "Tensor?", "cp_size": "int", "cp_rank": "int", "max_seqlen": "SymInt?", "backward": "bool"}
OP_ARGUMENTS = tuple(name for a in ARGUMENTS if a not in ("inplace", "out", "stream")
                     for name in (("offsets_tensor", "offset") if a == "offsets" else (a,)))
assert tuple(OP_TYPES) == OP_ARGUMENTS, "OP_TYPES must follow rope_api.ARGUMENTS"
_SCHEMA = ", ".join(f"{OP_TYPES[name]} {name}" for name in OP_ARGUMENTS)
_OFFSETS = OP_ARGUMENTS.index("offsets_tensor")  # then offset; run_rope takes them as one argument, offsets
LIBRARY.define(f"rope(Tensor x, {_SCHEMA}) -> Tensor")
LIBRARY.define(f"rope_(Tensor(a!) x, {_SCHEMA}) -> ()")
LIBRARY.define(f"rope_qk(Tensor q, Tensor k, {_SCHEMA}) -> (Tensor, Tensor)")
LIBRARY.define(f"rope_qk_(Tensor(a!) q, Tensor(b!) k, {_SCHEMA}) -> ()")


def _run_args(args: tuple) -> tuple:
    """The op's arguments after x as run_rope's (offsets merged), up to backward."""
    offsets = args[_OFFSETS] if args[_OFFSETS] is not None else args[_OFFSETS + 1]
    return args[:_OFFSETS] + (offsets,) + args[_OFFSETS + 2:]


def _refuse_leaf_in_place(x: torch.Tensor) -> None:
    """Torch refuses in-place writes to a leaf that requires grad (or a view of one): refuse them too, before
    the kernel runs (autograd.Function's own check comes after its forward has written x)."""
    base = x._base
    if x.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
        raise RuntimeError("x: a leaf Variable that requires grad (or a view of one) cannot be rotated in place, "
                           "as torch refuses any in-place operation on one; use inplace=False")


# Argument types that are no tensor (mrope_section is a tuple or list of ints).
_SCALARS = frozenset((int, float, bool, str, tuple, list))


class _RopeGrad(torch.autograd.Function):
    """Autograd of rope (x) and rope_qk (q, k): the backward is the same rotation with the direction flipped (the
    exact vector-Jacobian product), out of place, by the forward's ``run(*tensors, arguments, backward,
    inplace)``. Only the rotated tensors get gradients."""

    @staticmethod
    def forward(ctx, run, arguments: tuple, backward: bool, inplace: bool, *tensors):
        result = run(*tensors, arguments, backward, inplace)  # first: it validates every argument
        ctx.run, ctx.arguments, ctx.backward = run, arguments, backward
        # The tensor arguments (tables, positions, offsets) are also saved for backward, for the version
        # check on unpacking: a backward after one of them was changed in place raises. Once validated, an
        # argument that is not a scalar is a tensor (a type test: isinstance with torch.Tensor is slow).
        ctx.save_for_backward(*[a for a in arguments if a is not None and type(a) not in _SCALARS])
        if inplace:
            ctx.mark_dirty(*tensors)
        return result

    @staticmethod
    def backward(ctx, *grads):
        ctx.saved_tensors  # noqa: B018 (unpacked for the version check alone; ctx.arguments holds them too)
        result = ctx.run(*grads, ctx.arguments, not ctx.backward, False)
        return (None, None, None, None) + (result if isinstance(result, tuple) else (result,))


def _run_eager(x, arguments: tuple, backward: bool, inplace: bool):
    """``arguments``: run_rope's, from freqs to max_seqlen (x, the direction and in-place/out apart)."""
    return run_rope(x, *arguments, backward, inplace, x if inplace else None)


def _run_op(x, arguments: tuple, backward: bool, inplace: bool):
    """``arguments``: the allocating op's, from freqs to max_seqlen (its autograd never runs in place)."""
    return _rope_op(x, *arguments, backward)


def _run_qk_eager(q, k, arguments: tuple, backward: bool, inplace: bool):
    """``arguments``: run_rope_qk's, from freqs to max_seqlen."""
    return run_rope_qk(q, k, *arguments, backward, inplace, q if inplace else None, k if inplace else None)


def _run_qk_op(q, k, arguments: tuple, backward: bool, inplace: bool):
    return _rope_qk_op(q, k, *arguments, backward)


# The op kernels pass their arguments on positionally (run_rope): keyword re-binding of 19 arguments
# costs about a microsecond a call.
def _rope_kernel(x, *args):
    # out=None: run_rope allocates it, and a fresh out needs no overlap check nor key entries of its own
    return run_rope(x, *_run_args(args), False, None)


def _rope_inplace_kernel(x, *args):
    run_rope(x, *_run_args(args), True, x)


def _rope_qk_kernel(q, k, *args):
    return run_rope_qk(q, k, *_run_args(args), False, None, None)


def _rope_qk_inplace_kernel(q, k, *args):
    run_rope_qk(q, k, *_run_args(args), True, q, k)



@fake("rope")
def _(x, *args):
    return torch.empty_like(x)


@fake("rope_")
def _(x, *args):
    return None


@fake("rope_qk")
def _(q, k, *args):
    return torch.empty_like(q), torch.empty_like(k)


@fake("rope_qk_")
def _(q, k, *args):
    return None


_rope_op = torch.ops.cukiln.rope.default
_rope_inplace_op = torch.ops.cukiln.rope_.default
_rope_qk_op = torch.ops.cukiln.rope_qk.default
_rope_qk_inplace_op = torch.ops.cukiln.rope_qk_.default


# The ops' autograd kernels, written out rather than registered with register_autograd, whose generic
# wrapper (a scan of every argument for requires_grad, then a redispatch back into Python) cost about
# 6 µs a call without a gradient and 75 µs with one (benchmarks/studies/host_path_sim.py). Without a gradient an
# eager call runs the kernel at once: the dispatcher's remaining keys would do nothing for a plain tensor.
def _rope_autograd(x, *arguments):
    if wants_grad(x):
        *arguments, backward = arguments
        return _RopeGrad.apply(_run_op, tuple(arguments), backward, False, x)
    if eager(x):
        return _rope_kernel(x, *arguments)
    with torch._C._AutoDispatchBelowAutograd():
        return _rope_op(x, *arguments)


def _rope_inplace_autograd(x, *arguments):
    if x.requires_grad:  # tested first: the helper's grad-mode query would cost every call
        refuse_untracked_gradients("cukiln::rope_", (("x", x),), "cukiln.torch.rope(x, ..., inplace=True)")
    if eager(x):
        return _rope_inplace_kernel(x, *arguments)
    with torch._C._AutoDispatchBelowAutograd():
        return _rope_inplace_op(x, *arguments)


def _rope_qk_autograd(q, k, *arguments):
    if wants_grad(q) or wants_grad(k):
        *arguments, backward = arguments
        return _RopeGrad.apply(_run_qk_op, tuple(arguments), backward, False, q, k)
    if eager(q):
        return _rope_qk_kernel(q, k, *arguments)
    with torch._C._AutoDispatchBelowAutograd():
        return _rope_qk_op(q, k, *arguments)


def _rope_qk_inplace_autograd(q, k, *arguments):
    if q.requires_grad or k.requires_grad:
        refuse_untracked_gradients("cukiln::rope_qk_", (("q", q), ("k", k)),
                                   "cukiln.torch.rope_qk(q, k, ..., inplace=True)")
    if eager(q):
        return _rope_qk_inplace_kernel(q, k, *arguments)
    with torch._C._AutoDispatchBelowAutograd():
        return _rope_qk_inplace_op(q, k, *arguments)


# Each op's argument index of the tensors rope_api.describe_op places (x, k and the tables).
def _op_positions(rotated: int) -> dict:
    first = rotated  # the op's arguments after the rotated tensors start here
    positions = {"x": 0, "k": 1 if rotated == 2 else None}
    positions.update({name: first + OP_ARGUMENTS.index("offsets_tensor" if name == "offsets" else name)
                      for name in ("freqs", "cos", "sin", "cos_sin_cache", "inv_freq", "positions", "offsets",
                                   "cu_seqlens")})
    return positions


_ONE, _TWO = _op_positions(1), _op_positions(2)


# The native hot path's misses (runtime/native.py): run the call as the Python kernel does, then describe its plan.
def _rope_miss(x, *args):
    result = _rope_kernel(x, *args)
    return result, rope_api.describe_op(x, None, _run_args(args), False, _ONE, result, None)


def _rope_inplace_miss(x, *args):
    _rope_inplace_kernel(x, *args)
    return None, rope_api.describe_op(x, None, _run_args(args), True, _ONE, x, None)


def _rope_qk_miss(q, k, *args):
    q_out, k_out = _rope_qk_kernel(q, k, *args)
    return (q_out, k_out), rope_api.describe_op(q, k, _run_args(args), False, _TWO, q_out, k_out)


def _rope_qk_inplace_miss(q, k, *args):
    _rope_qk_inplace_kernel(q, k, *args)
    return None, rope_api.describe_op(q, k, _run_args(args), True, _TWO, q, k)


# CompositeExplicitAutograd: every device reaches the kernel, whose validation explains a CPU tensor.
implement("rope", _rope_kernel, _rope_autograd, _rope_miss)
implement("rope_", _rope_inplace_kernel, _rope_inplace_autograd, _rope_inplace_miss)
implement("rope_qk", _rope_qk_kernel, _rope_qk_autograd, _rope_qk_miss)
implement("rope_qk_", _rope_qk_inplace_kernel, _rope_qk_inplace_autograd, _rope_qk_inplace_miss)


def _op_args(freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
             rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
             max_seqlen, backward) -> tuple:
    """The ops' arguments after the tensors rotated: scalars normalized, offsets split in two."""
    offsets_tensor = offsets if isinstance(offsets, torch.Tensor) else None
    offset = None if offsets_tensor is not None else offsets
    return (freqs, cos, sin, cos_sin_cache, inv_freq, None if base is None else float(base), float(scale),
            float(mscale), layout, bool(interleaved), rotary_dim, rotary_offset, positions,
            None if mrope_section is None else list(mrope_section), bool(mrope_interleaved), offsets_tensor, offset,
            cu_seqlens, cp_size, cp_rank, max_seqlen, bool(backward))


@one_graph_node
def rope(x, *, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0, mscale=1.0,
         layout="sbhd", interleaved=False, rotary_dim=None, rotary_offset=0, positions=None, mrope_section=None,
         mrope_interleaved=False, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0, max_seqlen=None,
         backward=False, inplace=False, out=None):
    """cukiln.rope as the ops cukiln::rope / cukiln::rope_ (see cukiln.rope for the arguments; eager calls
    run through the ops' native plans without the dispatcher, or the kernels directly, see cukiln.torch). ``out=`` is
    not supported here: an op returns a new tensor or mutates x (``inplace=True``)."""
    if out is not None:
        raise ValueError("out: cukiln.torch.rope returns a new tensor (or rotates x with inplace=True); "
                         "use cukiln.rope for out=")
    if (_NATIVE_CALL is not None and x.is_cuda and eager(x)
            and untracked(x, freqs, cos, sin, cos_sin_cache, inv_freq)):  # the op's plans, without the dispatcher
        return _NATIVE_CALL(x, None, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout,
                            interleaved, rotary_dim, rotary_offset, positions, mrope_section, mrope_interleaved,
                            offsets, cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace, None, None)
    grad = wants_grad(x)
    if (grad and eager(x)) or direct(x, "rope_" if inplace else "rope"):
        if grad:
            if inplace:
                _refuse_leaf_in_place(x)
            return _RopeGrad.apply(_run_eager, (freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout,
                                                interleaved, rotary_dim, rotary_offset, positions, mrope_section,
                                                mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank, max_seqlen),
                                   backward, inplace, x)
        return run_rope(x, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved,
                        rotary_dim, rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens,
                        cp_size, cp_rank, max_seqlen, backward, inplace, None)
    args = (x, *_op_args(freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
                         rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size,
                         cp_rank, max_seqlen, backward))
    if inplace and grad:  # traced: the differentiable op, and a copy that autograd sees as in place
        return x.copy_(specialized_call("rope", args))
    if inplace:
        specialized_call("rope_", args)
        return x
    return specialized_call("rope", args)


@one_graph_node
def rope_qk(q, k, *, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0,
            mscale=1.0, layout="sbhd", interleaved=False, rotary_dim=None, rotary_offset=0, positions=None,
            mrope_section=None, mrope_interleaved=False, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0,
            max_seqlen=None, backward=False, inplace=False, out=None):
    """cukiln.rope_qk as the ops cukiln::rope_qk / cukiln::rope_qk_ (see cukiln.rope_qk for the arguments; eager
    calls as cukiln.torch.rope's): (q_out, k_out), differentiable in q and k. ``k=None``: q alone, as
    cukiln.torch.rope (k_out None). ``out=`` is not supported here."""
    if out is not None:
        raise ValueError("out: cukiln.torch.rope_qk returns new tensors (or rotates q and k with inplace=True); "
                         "use cukiln.rope_qk for out=")
    arguments = (freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
                 rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
                 max_seqlen)
    if k is None:
        return rope(q, **dict(zip(ARGUMENTS, arguments)), backward=backward, inplace=inplace), None
    if (_NATIVE_CALL is not None and q.is_cuda and type(k) is torch.Tensor and eager(q)
            and untracked(q, k, freqs, cos, sin, cos_sin_cache, inv_freq)):  # as rope's
        return _NATIVE_CALL(q, k, *arguments, backward, inplace, None, None)
    grad = wants_grad(q) or wants_grad(k)
    if ((grad and eager(q)) or direct(q, "rope_qk_" if inplace else "rope_qk")) and type(k) is torch.Tensor:
        if grad:
            for t in (q, k) if inplace else ():
                if t.requires_grad:
                    _refuse_leaf_in_place(t)
            return _RopeGrad.apply(_run_qk_eager, arguments, backward, inplace, q, k)
        return _run_qk_eager(q, k, arguments, backward, inplace)
    args = (q, k, *_op_args(*arguments, backward))
    if inplace and grad:  # traced: the differentiable op, and copies that autograd sees as in place
        q_new, k_new = specialized_call("rope_qk", args)
        return q.copy_(q_new), k.copy_(k_new)
    if inplace:
        specialized_call("rope_qk_", args)
        return q, k
    return specialized_call("rope_qk", args)


def _rope_out_miss(x, *args_and_out):
    """The miss of cukiln.rope's out= calls (native.variant): the op's arguments, then the caller's out."""
    args, out = args_and_out[:-1], args_and_out[-1]
    run_rope(x, *_run_args(args), False, out)
    return out, rope_api.describe_op(x, None, _run_args(args), False, _ONE, out, None, given=1 + len(OP_ARGUMENTS))


def _rope_qk_out_miss(q, k, *args_and_outs):
    """The miss of cukiln.rope_qk's out= calls: the op's arguments, then the caller's q_out and k_out."""
    args, q_out, k_out = args_and_outs[:-2], args_and_outs[-2], args_and_outs[-1]
    run_rope_qk(q, k, *_run_args(args), False, q_out, k_out)
    return (q_out, k_out), rope_api.describe_op(q, k, _run_args(args), False, _TWO, q_out, k_out,
                                                given=2 + len(OP_ARGUMENTS))


def _native_call():
    """cukiln.rope's and rope_qk's calls through the native hot path (no autograd): ``call(x, k, freqs, ...,
    max_seqlen, backward, inplace, out, k_out)``, run_rope's arguments with k after x and the caller's outputs (or
    None); None where the native path does not serve the ops."""
    from . import native

    handles = [NATIVE_HANDLES.get(name) for name in ("rope", "rope_", "rope_qk", "rope_qk_")]
    if None in handles:
        return None
    rope, rope_, rope_qk, rope_qk_ = (native.caller(h) for h in handles)
    rope_out = native.variant(handles[0], "#out", _rope_out_miss, 1)
    rope_qk_out = native.variant(handles[2], "#out", _rope_qk_out_miss, 2)

    def call(x, k, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
             rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
             max_seqlen, backward, inplace, out, k_out):
        # _op_args' work, less the float and bool conversions that the native callers make themselves
        offsets_tensor = offsets if isinstance(offsets, torch.Tensor) else None
        args = (freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
                rotary_offset, positions, None if mrope_section is None else list(mrope_section), mrope_interleaved,
                offsets_tensor, None if offsets_tensor is not None else offsets, cu_seqlens, cp_size, cp_rank,
                max_seqlen, backward)
        if k is None:
            if inplace:
                rope_(x, *args)
                return x
            return rope(x, *args) if out is None else rope_out(x, *args, out)
        if inplace:
            rope_qk_(x, k, *args)
            return x, k
        return rope_qk(x, k, *args) if out is None else rope_qk_out(x, k, *args, out, k_out)

    return call


_NATIVE_CALL = _native_call()
if _NATIVE_CALL is not None:
    PUBLIC_CALLS["rope"] = PUBLIC_CALLS["rope_qk"] = _NATIVE_CALL
