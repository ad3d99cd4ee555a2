"""cukiln.rope: rotary position embedding for sbhd, bshd and packed thd tensors of any strides, without copies.

The per-call path: read each tensor's metadata, look the call up in the plan cache (keyed by everything
a plan depends on except pointer values: shapes, strides, dtypes, devices, pointer alignment, scalar
arguments), re-check what depends on pointers (overlaps), fill the pointers in, launch. A cache miss
runs the full validation of rope_plan.plan_rope.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace

from .interop import call_with_foreign_arrays, is_plain_torch_call
from .launch import kernel
from .loader import KERNELS
from .overrides import CURRENT as OVERRIDES
from .plan_cache import ALIGN_MASK, PlanCache, Refill, slots_for
from .rope_plan import RopePlan, plan_rope
from .tensors import FLOATS, INTS, from_torch, refuse_untracked_gradients

# Tensor arguments in a fixed order, the dtypes each one takes, and the kernel-parameter field its pointer fills.
_TENSOR_ARGS = ("x", "out", "freqs", "cos", "sin", "inv_freq", "positions", "offsets", "cu_seqlens")
_ACCEPTS = (FLOATS, FLOATS, ("fp32",), FLOATS, FLOATS, ("fp32",), INTS, INTS, ("int32",))
_POINTER_FIELDS = ("x", "out", "table", "cos", "sin", "inv_freq", "positions", "offsets", "cu_seqlens")


@dataclass
class _CachedPlan:
    plan: RopePlan | None  # None: nothing to launch (an empty tensor)
    refill: Refill
    kernel: object = None  # the bound launch.Kernel, made on the plan's first launch

    def bind(self):
        p = self.plan
        self.kernel = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, 0, p.overlap_previous)
        return self.kernel


PLANS = PlanCache()


def rope(x, *, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
         interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1,
         cp_rank=0, max_seqlen=None, backward=False, inplace=False, out=None, stream=None):
    """Rotate the first ``rotary_dim`` features of every head of ``x`` by position-dependent angles.

    x: [s, b, h, d] (layout "sbhd"), [b, s, h, d] ("bshd") or packed [t, h, d] ("thd"), fp32/fp16/bf16,
    any strides, on a CUDA device.
    Angles, exactly one source: ``freqs`` [max_pos, rotary_dim] fp32 angles (sin/cos taken in the kernel);
    ``cos``/``sin`` caches [max_pos, rotary_dim] or [max_pos, rotary_dim/2] in fp32 or x's dtype;
    ``inv_freq`` [rotary_dim/2] fp32 with angle = position * scale * inv_freq[i]; or ``base``, with
    inv_freq[i] = base ** (-2i / rotary_dim). Tables of shape [max_pos, 1, 1, width] are accepted.
    rotary_dim defaults to the table width (freqs, cos/sin), 2 * len(inv_freq), or d (base).
    Positions: the index in the sequence plus ``offsets`` (an int or an int tensor [b], one per sequence),
    or explicit ``positions`` ([s] or [b, s] ints; [t] for thd, which then needs no cu_seqlens).
    thd: ``cu_seqlens`` int32 [b + 1] (on x's device, or on the CPU: then its values are checked and it is
    copied over) delimits the sequences; tokens past the last sequence are left alone (out-of-place,
    their rows of out are not written). ``max_seqlen`` (the longest global sequence, optional) lets the
    token/grid rule consider grid dispatch; ``CUKILN_ROPE_THD_DISPATCH=token|grid|auto`` (or
    ``cukiln.overrides.forced("rope_thd_dispatch", mode)``) overrides the rule.
    Context parallel (``cp_size``, ``cp_rank``): TransformerEngine's load-balanced split, each sequence in
    2 * cp_size chunks of which this rank holds chunks cp_rank and 2 * cp_size - 1 - cp_rank; for thd,
    cu_seqlens are the global offsets. A malformed device-resident cu_seqlens (a negative length, or a
    length not divisible by 2 * cp_size) gives that sequence's tokens NaN rotated features.
    A position outside a table that only the device knows makes that token's rotated features NaN;
    nothing is read out of bounds.
    ``backward=True`` applies the exact vector-Jacobian product of the forward to a gradient x.
    ``inplace=True`` rotates x itself, reading and writing only the rotated features; otherwise the
    result goes to ``out`` (allocated like x when None) and features [rotary_dim:] are copied over.
    Runs on the current torch stream without synchronizing (``stream=`` picks another); CuPy, JAX or any
    ``__dlpack__`` / ``__cuda_array_interface__`` arrays are taken without a copy and the result comes back
    in x's framework (see cukiln.interop). Returns the output tensor.
    Autograd does not see this call: with grad mode on, an x, out or angle table that requires grad is refused
    (cukiln.torch.rope is the differentiable form in x); inside an autograd.Function, or detached, it runs.
    """
    if not is_plain_torch_call(x, stream):  # other frameworks' arrays, or a stream named
        return call_with_foreign_arrays(rope, locals())
    # Written out (not a loop over the tensors) because it runs on every call.
    if (x.requires_grad or (out is not None and getattr(out, "requires_grad", False))
            or (freqs is not None and getattr(freqs, "requires_grad", False))
            or (cos is not None and getattr(cos, "requires_grad", False))
            or (sin is not None and getattr(sin, "requires_grad", False))
            or (inv_freq is not None and getattr(inv_freq, "requires_grad", False))):
        refuse_untracked_gradients("cukiln.rope", (("x", x), ("out", out), ("freqs", freqs), ("cos", cos),
                                                   ("sin", sin), ("inv_freq", inv_freq)), "cukiln.torch.rope")
    # Positional: 19 keyword arguments would cost this call about a microsecond.
    return run_rope(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions, offsets,
                    cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace, out)


# rope's arguments after x, in order: the one declaration (its signature above) that run_rope, prepare, the
# reference, the torch op's schema and cukiln.torch.rope follow (tests/runtime/test_signatures.py checks each).
ARGUMENTS = tuple(inspect.signature(rope).parameters)[1:]


def run_rope(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions, offsets,
             cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace, out):
    """rope() on torch tensors, every argument positional (as rope's signature orders them, less stream):
    the entry for callers that already hold torch tensors, such as the torch ops."""
    cached, values, result, copied = prepare(x, freqs, cos, sin, inv_freq, base, scale, layout, interleaved,
                                              rotary_dim, positions, offsets, cu_seqlens, cp_size, cp_rank,
                                              max_seqlen, backward, inplace, out)
    p = cached.plan
    if p is not None:
        (cached.kernel or cached.bind())(values, _torch._C._cuda_getCurrentRawStream(p.device))
        if inplace or out is not None:
            # x or the caller's out written behind autograd's back: bump its version as torch's own in-place
            # ops do, so that a backward needing the old values raises instead of reading the new ones
            _torch._C._increment_version((result,))
    # A device copy of host cu_seqlens lives until its kernel is queued: the caching allocator then
    # orders any reuse of its memory after the kernel (freed before the launch, an allocator without
    # a cache would release memory the kernel is about to read).
    del copied
    return result


_torch = None  # the torch module, imported by the first call (cukiln itself imports without torch)


def _import_torch():
    global _torch
    import torch

    _torch = torch
    return torch


def plan_call(x, *, rule: dict | None = None, **kwargs) -> tuple[RopePlan | None, object]:
    """Validate a rope() call (the keyword arguments of cukiln.rope) and plan its launch without launching:
    (RopePlan or None when there is nothing to launch, output tensor). ``rule``: the dense launch choices to
    plan with instead of the dispatch table's (as `cukiln tune rope` measures them; the plan is not cached)."""
    if rule is not None:
        return _plan_uncached(x, rule=rule, **kwargs)
    cached, values, out, _ = prepare(x, **kwargs)
    p = cached.plan
    if p is None:
        return None, out
    return replace(p, values=tuple(values)), out


def launch_plan(plan: RopePlan) -> None:
    """Launch a plan from plan_call on the current torch stream (measurements: the call's launch, without its
    validation)."""
    torch = _torch or _import_torch()
    kernel(plan.device, plan.module, plan.symbol, plan.fmt, plan.grid, plan.block, 0, plan.overlap_previous)(
        plan.values, torch._C._cuda_getCurrentRawStream(plan.device))


def _plan_uncached(x, *, rule: dict, out=None, inplace=False, **kwargs):
    torch = _torch or _import_torch()
    out = x if inplace else (torch.empty_like(x) if out is None else out)
    tensors = {name: kwargs.get(name) for name in _TENSOR_ARGS[2:]}
    cached = _plan_and_describe((x, out) + tuple(tensors.values()), inplace=inplace, fresh=False, cu_host=None,
                                thd_dispatch=OVERRIDES["rope_thd_dispatch"], rule=rule,
                                **{k: v for k, v in kwargs.items() if k not in tensors})
    return cached.plan, out


def prepare(x, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
            interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1,
            cp_rank=0, max_seqlen=None, backward=False, inplace=False, out=None):
    """Everything of a rope() call but the launch: (cached plan (its plan is None when there is nothing to
    launch), parameter values with this call's pointers, output tensor, the device copy of host cu_seqlens or
    None, which must outlive the launch). Runs on every call (`cukiln bench overhead` times it alone): the
    plan-cache hit is written out for speed."""
    torch = _torch or _import_torch()
    cu_host = copied = None
    if cu_seqlens is not None and isinstance(cu_seqlens, torch.Tensor) and cu_seqlens.device.type == "cpu" \
            and isinstance(x, torch.Tensor):
        # Host values: checked in full by the plan, then copied to x's device (not cached: values vary).
        if cu_seqlens.dtype != torch.int32:
            raise TypeError(f"cu_seqlens: expected int32, got {str(cu_seqlens.dtype).replace('torch.', '')}")
        cu_host = tuple(cu_seqlens.tolist())
        cu_seqlens = copied = cu_seqlens.to(x.device)
    thd_dispatch = OVERRIDES["rope_thd_dispatch"] if layout == "thd" else "auto"
    if not isinstance(x, torch.Tensor):
        from_torch(x, "x", FLOATS)  # raises the TypeError naming x
    fresh = False
    if inplace:
        if out is not None and out is not x:
            raise ValueError("out: inplace=True writes x itself; got a different out tensor")
        out = x
    elif out is None:
        out, fresh = torch.empty_like(x), True
    others = (freqs, cos, sin, inv_freq, positions, offsets, cu_seqlens)
    # The cache key: everything the plan depends on except pointer values.
    try:
        xp = x.data_ptr()
        pointers = [xp, xp]
        key = [x.shape, x.stride(), x.dtype, x.is_neg(), x.get_device(), xp & ALIGN_MASK, base, scale, layout,
               interleaved, rotary_dim, backward, inplace, fresh, cp_size, cp_rank, max_seqlen, thd_dispatch, cu_host]
        if out is not x:
            pointers[1] = op = out.data_ptr()
            if not fresh:
                key += (out.shape, out.stride(), out.dtype, out.is_neg(), out.get_device(), op & ALIGN_MASK, op == xp)
        for t in others:
            if t is None or type(t) is int:
                key.append(t)
                pointers.append(0)
            else:
                ptr = t.data_ptr()
                key.append((t.shape, t.stride(), t.dtype, t.is_neg(), t.get_device(), ptr & ALIGN_MASK))
                pointers.append(ptr)
        key = tuple(key)
        cached = PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, unhashable scalars: the full validation explains
        key, cached = None, None
    if cached is None:
        cached = _plan_and_describe((x, out) + others, base=base, scale=scale, layout=layout,
                                    interleaved=interleaved, rotary_dim=rotary_dim, backward=backward,
                                    inplace=inplace, fresh=fresh, cu_host=cu_host, cp_size=cp_size, cp_rank=cp_rank,
                                    max_seqlen=max_seqlen, thd_dispatch=thd_dispatch)
        if key is not None:
            PLANS.put(key, cached)
        p = cached.plan
        return cached, (p.values if p is not None else ()), out, copied
    p = cached.plan
    if p is None:
        return cached, (), out, copied
    refill = cached.refill
    if refill.checks:
        _refuse_overlap(refill.overlapping(pointers))
    return cached, refill.values(p.values, pointers), out, copied


def _refuse_overlap(arg: int | None) -> None:
    """Pointer-dependent part of the validation: out must not overlap an input (nor x, unless it is x)."""
    if arg is not None:
        name = _TENSOR_ARGS[arg]
        raise ValueError(f"out: overlaps {name}" + (
            " without being exactly x (use inplace=True to rotate x itself)" if name == "x"
            else ", which the kernel reads while it writes out"))


def _plan_and_describe(args, *, base=None, scale=1.0, layout="sbhd", interleaved=False, rotary_dim=None,
                       backward=False, inplace=False, fresh=False, cu_host=None, cp_size=1, cp_rank=0,
                       max_seqlen=None, thd_dispatch="auto", rule=None) -> _CachedPlan:
    """Full validation and planning; records where the pointers go so that later calls only refill them."""
    # Only offsets takes an int; an int anywhere else is refused by from_torch (it would be no tensor at all).
    infos = [None if t is None or (name == "offsets" and isinstance(t, int)) else from_torch(t, name, accepts)
             for name, t, accepts in zip(_TENSOR_ARGS, args, _ACCEPTS)]
    x, out, freqs, cos, sin, inv_freq, positions, offsets, cu_seqlens = infos
    offsets_arg = args[7] if isinstance(args[7], int) or args[7] is None else offsets
    guarded = tuple((name, info) for name, info in zip(_TENSOR_ARGS[2:], infos[2:]) if info is not None)
    plan = plan_rope(x, out, freqs=freqs, cos=cos, sin=sin, inv_freq=inv_freq, base=base, scale=scale,
                     layout=layout, interleaved=interleaved, rotary_dim=rotary_dim, positions=positions,
                     offsets=offsets_arg, cu_seqlens=cu_seqlens, cu_seqlens_host=cu_host, cp_size=cp_size,
                     cp_rank=cp_rank, max_seqlen=max_seqlen, thd_dispatch=thd_dispatch,
                     arch=KERNELS.arch(x.device), backward=backward,
                     inplace=inplace, guarded=guarded, rule=rule)
    slots = ()
    if plan is not None:
        fields = tuple(f if info is not None else None for f, info in zip(_POINTER_FIELDS, infos))
        slots = slots_for(plan.field_names, fields)
    spans = tuple(None if info is None else tuple(s - info.ptr for s in info.byte_span()) for info in infos)
    # A fresh out overlaps nothing; otherwise out's current pointer is checked against every input's on
    # each call (x's too, unless out is exactly x: a view of x with other strides is refused).
    in_place = inplace or (out is not None and out.same_view(x))
    checks = () if fresh else tuple(i for i, span in enumerate(spans)
                                    if span is not None and i != 1 and not (i == 0 and in_place))
    return _CachedPlan(plan, Refill(slots, spans, checks))

