"""cukiln.torch: the kernels as torch.library ops, for autograd, torch.compile and CUDA graphs.

    cukiln.torch.rope(x, ...)               same signature as cukiln.rope; differentiable in x
    cukiln.torch.decode_attention(q, ...)   same signature as cukiln.decode_attention

Ops: ``cukiln::rope`` (out of place), ``cukiln::rope_`` (in place, declared as mutating x) and
``cukiln::decode_attention`` (returns the output and the log-sum-exp). Each has a fake (meta)
implementation, so torch.compile traces them without running them. Gradients: rope's backward is cukiln's
backward kernel on the incoming gradient (the exact vector-Jacobian product); angle tables, positions,
offsets and cu_seqlens get none. ``cukiln.torch.rope(..., inplace=True)`` is differentiable too (eager:
the kernel in place, marked as such for autograd; traced: the out-of-place op and a copy into x), while
the op ``cukiln::rope_`` and decode attention are not: given a tensor that requires grad (grad mode on),
they raise rather than return a result that autograd would silently treat as a constant.
Arguments that take an int or a tensor in cukiln (offsets, kv_lens, kv_start) travel as two op arguments.

An eager call (a plain tensor, no torch.compile, functorch transform or dispatch mode watching) runs the
kernels directly, with rope's gradient through an autograd.Function that calls the backward kernel: the
ops' results without the dispatcher's host time (see `cukiln bench overhead`). Every other call goes
through the ops, whose autograd kernels again call the kernels directly when the call is eager.
"""

from __future__ import annotations

import torch

from .decode_api import decode_attention as _decode_attention
from .rope_api import run_rope
from .tensors import refuse_untracked_gradients


def _eager(x: torch.Tensor) -> bool:
    """True when nothing traces or intercepts ops (torch.compile, functorch transforms, dispatch modes) and
    x is a plain tensor: then calling the kernels directly is exactly what the ops would do."""
    return (type(x) is torch.Tensor and not torch.compiler.is_compiling()
            and not torch._C._are_functorch_transforms_active() and not torch._C._len_torch_dispatch_stack())


def _wants_grad(x: torch.Tensor) -> bool:
    return x.requires_grad and torch.is_grad_enabled()


def _refuse_leaf_in_place(x: torch.Tensor) -> None:
    """Torch refuses in-place writes to a leaf that requires grad (or a view of one): refuse them too, before
    the kernel runs (autograd.Function's own check comes after its forward has written x)."""
    base = x._base
    if x.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
        raise RuntimeError("x: a leaf Variable that requires grad (or a view of one) cannot be rotated in place, "
                           "as torch refuses any in-place operation on one; use inplace=False")


_SCALARS = frozenset((int, float, bool, str))


class _RopeGrad(torch.autograd.Function):
    """Rope's autograd: the backward is the same rotation with the direction flipped (the exact
    vector-Jacobian product), out of place, by the forward's ``run(x, arguments, backward, inplace)``.
    Only x gets a gradient."""

    @staticmethod
    def forward(ctx, x, run, arguments: tuple, backward: bool, inplace: bool):
        result = run(x, arguments, backward, inplace)  # first: it validates every argument
        ctx.run, ctx.arguments, ctx.backward = run, arguments, backward
        # The tensor arguments (tables, positions, offsets) are also saved for backward, for the version
        # check on unpacking: a backward after one of them was changed in place raises. Once validated, an
        # argument that is not a scalar is a tensor (a type test: isinstance with torch.Tensor is slow).
        ctx.save_for_backward(*[a for a in arguments if a is not None and type(a) not in _SCALARS])
        if inplace:
            ctx.mark_dirty(x)
        return result

    @staticmethod
    def backward(ctx, grad):
        ctx.saved_tensors  # noqa: B018 (unpacked for the version check alone; ctx.arguments holds them too)
        return ctx.run(grad, ctx.arguments, not ctx.backward, False), None, None, None, None


def _run_eager(x, arguments: tuple, backward: bool, inplace: bool):
    """``arguments``: run_rope's, from freqs to max_seqlen (x, the direction and in-place/out apart)."""
    return run_rope(x, *arguments, backward, inplace, x if inplace else None)


def _run_op(x, arguments: tuple, backward: bool, inplace: bool):
    """``arguments``: the allocating op's, from freqs to max_seqlen (its autograd never runs in place)."""
    return _rope_op(x, *arguments, backward)


# The ops are defined with torch.library.Library rather than torch.library.custom_op: the same schema,
# fake kernels and autograd, at a fraction of custom_op's per-call host time (`cukiln bench overhead`).
_LIB = torch.library.Library("cukiln", "DEF")
_ROPE_ARGUMENTS = ("Tensor? freqs, Tensor? cos, Tensor? sin, Tensor? inv_freq, float? base, float scale, str layout, "
                   "bool interleaved, int? rotary_dim, Tensor? positions, Tensor? offsets_tensor, int? offset, "
                   "Tensor? cu_seqlens, int cp_size, int cp_rank, int? max_seqlen, bool backward")
_LIB.define(f"rope(Tensor x, {_ROPE_ARGUMENTS}) -> Tensor")
_LIB.define(f"rope_(Tensor(a!) x, {_ROPE_ARGUMENTS}) -> ()")
_LIB.define("decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor? kv_lens_tensor, int kv_len, "
            "str kv_layout, Tensor? kv_start_tensor, int kv_start, float? scale, float? softcap, int? num_splits) "
            "-> (Tensor, Tensor)")


# The op kernels pass their arguments on positionally (run_rope): keyword re-binding of 19 arguments
# costs about a microsecond a call.
def _rope_kernel(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions,
                 offsets_tensor, offset, cu_seqlens, cp_size, cp_rank, max_seqlen, backward):
    offsets = offsets_tensor if offsets_tensor is not None else offset
    # out=None: run_rope allocates it, and a fresh out needs no overlap check nor key entries of its own
    return run_rope(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions, offsets,
                    cu_seqlens, cp_size, cp_rank, max_seqlen, backward, False, None)


def _rope_inplace_kernel(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions,
                         offsets_tensor, offset, cu_seqlens, cp_size, cp_rank, max_seqlen, backward):
    offsets = offsets_tensor if offsets_tensor is not None else offset
    run_rope(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions, offsets,
             cu_seqlens, cp_size, cp_rank, max_seqlen, backward, True, x)


def _decode_kernel(q, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start, scale,
                   softcap, num_splits):
    return _decode_attention(q, k_cache, v_cache, kv_lens_tensor if kv_lens_tensor is not None else kv_len,
                             kv_layout=kv_layout,
                             kv_start=kv_start_tensor if kv_start_tensor is not None else kv_start,
                             scale=scale, softcap=softcap, num_splits=num_splits, return_lse=True)


# CompositeExplicitAutograd: every device reaches the kernel, whose validation explains a CPU tensor.
_LIB.impl("rope", _rope_kernel, "CompositeExplicitAutograd")
_LIB.impl("rope_", _rope_inplace_kernel, "CompositeExplicitAutograd")
_LIB.impl("decode_attention", _decode_kernel, "CompositeExplicitAutograd")


@torch.library.register_fake("cukiln::rope", lib=_LIB)
def _(x, *args):
    return torch.empty_like(x)


@torch.library.register_fake("cukiln::rope_", lib=_LIB)
def _(x, *args):
    return None


@torch.library.register_fake("cukiln::decode_attention", lib=_LIB)
def _(q, k_cache, v_cache, *args):
    b, d = q.shape[0], q.shape[-1]
    heads = q.numel() // max(b * d, 1)
    out = q.new_empty((b, heads, d)).view(q.shape)
    return out, q.new_empty((b, heads), dtype=torch.float32)


_rope_op = torch.ops.cukiln.rope.default
_rope_inplace_op = torch.ops.cukiln.rope_.default
_decode_op = torch.ops.cukiln.decode_attention.default


# The ops' autograd kernels, written out rather than registered with register_autograd, whose generic
# wrapper (a scan of every argument for requires_grad, then a redispatch back into Python) cost about
# 6 µs a call without a gradient and 75 µs with one (benchmarks/host_path_sim.py). Without a gradient an
# eager call runs the kernel at once: the dispatcher's remaining keys would do nothing for a plain tensor.
def _rope_autograd(x, *arguments):
    if _wants_grad(x):
        *arguments, backward = arguments
        return _RopeGrad.apply(x, _run_op, tuple(arguments), backward, False)
    if _eager(x):
        return _rope_kernel(x, *arguments)
    with torch._C._AutoDispatchBelowAutograd():
        return _rope_op(x, *arguments)


def _rope_inplace_autograd(x, *arguments):
    if x.requires_grad:  # tested first: the helper's grad-mode query would cost every call
        refuse_untracked_gradients("cukiln::rope_", (("x", x),), "cukiln.torch.rope(x, ..., inplace=True)")
    if _eager(x):
        return _rope_inplace_kernel(x, *arguments)
    with torch._C._AutoDispatchBelowAutograd():
        return _rope_inplace_op(x, *arguments)


def _decode_autograd(q, k_cache, v_cache, *arguments):
    if _eager(q):  # decode_attention itself refuses tensors that require grad
        return _decode_kernel(q, k_cache, v_cache, *arguments)
    # traced, the fake kernel runs instead of decode_attention: refuse here
    refuse_untracked_gradients("cukiln::decode_attention", (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)))
    with torch._C._AutoDispatchBelowAutograd():
        return _decode_op(q, k_cache, v_cache, *arguments)


_LIB.impl("rope", _rope_autograd, "Autograd")
_LIB.impl("rope_", _rope_inplace_autograd, "Autograd")
_LIB.impl("decode_attention", _decode_autograd, "Autograd")


def rope(x, *, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
         interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0,
         max_seqlen=None, backward=False, inplace=False, out=None):
    """cukiln.rope as the ops cukiln::rope / cukiln::rope_ (see cukiln.rope for the arguments; eager calls
    run the kernels directly, see the module docstring). ``out=`` is not supported here: an op returns a new
    tensor or mutates x (``inplace=True``)."""
    if out is not None:
        raise ValueError("out: cukiln.torch.rope returns a new tensor (or rotates x with inplace=True); "
                         "use cukiln.rope for out=")
    wants_grad = _wants_grad(x)
    if _eager(x):
        if wants_grad:
            if inplace:
                _refuse_leaf_in_place(x)
            return _RopeGrad.apply(x, _run_eager, (freqs, cos, sin, inv_freq, base, scale, layout, interleaved,
                                                   rotary_dim, positions, offsets, cu_seqlens, cp_size, cp_rank,
                                                   max_seqlen), backward, inplace)
        return run_rope(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions, offsets,
                        cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace, None)
    offsets_tensor = offsets if isinstance(offsets, torch.Tensor) else None
    offset = None if offsets_tensor is not None else offsets
    args = (x, freqs, cos, sin, inv_freq, None if base is None else float(base), float(scale), layout,
            bool(interleaved), rotary_dim, positions, offsets_tensor, offset, cu_seqlens, cp_size, cp_rank,
            max_seqlen, bool(backward))
    if inplace and wants_grad:  # traced: the differentiable op, and a copy that autograd sees as in place
        return x.copy_(_rope_op(*args))
    if inplace:
        _rope_inplace_op(*args)
        return x
    return _rope_op(*args)


def decode_attention(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
                     num_splits=None, out=None, return_lse=False):
    """cukiln.decode_attention as the op cukiln::decode_attention (see there for the arguments; eager calls
    run the kernels directly); ``out=`` is not supported here."""
    if out is not None:
        raise ValueError("out: cukiln.torch.decode_attention returns a new tensor; use cukiln.decode_attention "
                         "for out=")
    if not isinstance(kv_lens, (int, torch.Tensor)) or isinstance(kv_lens, bool):
        raise TypeError(f"kv_lens: expected an int or an int32 tensor [b], got {type(kv_lens).__name__}")
    if _eager(q):  # decode_attention refuses tensors that require grad, as the op's autograd kernel does
        return _decode_attention(q, k_cache, v_cache, kv_lens, kv_layout=kv_layout, kv_start=kv_start, scale=scale,
                                 softcap=softcap, num_splits=num_splits, return_lse=return_lse)
    lens_tensor = kv_lens if isinstance(kv_lens, torch.Tensor) else None
    start_tensor = kv_start if isinstance(kv_start, torch.Tensor) else None
    result, lse = _decode_op(
        q, k_cache, v_cache, lens_tensor, 0 if lens_tensor is not None else kv_lens, kv_layout, start_tensor,
        0 if start_tensor is not None or kv_start is None else kv_start,
        None if scale is None else float(scale), None if softcap is None else float(softcap), num_splits)
    return (result, lse) if return_lse else result
