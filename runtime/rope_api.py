"""cukiln.rope and cukiln.rope_qk: rotary position embedding for sbhd, bshd and packed thd tensors of any strides,
without copies; rope_qk rotates q and k of the same tokens together, with each token's angles computed once.

The per-call path (plan_cache.py): read each tensor's metadata, look the call up in the plan cache (keyed by
everything a plan depends on except pointer values: shapes, strides, dtypes, devices, pointer alignment, scalar
arguments), re-check what depends on pointers (overlaps), fill the pointers in, launch. A cache miss runs the
full validation of rope_plan.plan_rope.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace

from .interop import call_with_foreign_arrays, is_plain_torch_call
from .launch import kernel
from .loader import KERNELS
from .overrides import CURRENT as OVERRIDES
from .plan_cache import ALIGN_MASK, PlanCache, Refill, add_tensors
from .rope_plan import RopePlan, plan_rope
from .tensors import FLOATS, INTS, from_torch, interleaving, refuse_untracked_gradients

# Tensor arguments in a fixed order (the call's pointers are listed so), and the dtypes each one takes.
_TENSOR_ARGS = ("x", "out", "k", "k_out", "freqs", "cos", "sin", "cos_sin_cache", "inv_freq", "positions", "offsets",
                "cu_seqlens")
_ACCEPTS = (FLOATS, FLOATS, FLOATS, FLOATS, ("fp32",), FLOATS, FLOATS, FLOATS, ("fp32",), INTS, INTS, ("int32",))
_INDEX = {name: i for i, name in enumerate(_TENSOR_ARGS)}


@dataclass
class _CachedPlan:
    plan: RopePlan | None  # None: nothing to launch (an empty tensor)
    refill: Refill
    then: "_CachedPlan | None" = None  # a second launch (rope_qk's k where no _qk variant serves the call)
    kernel: object = None  # the bound launch.Kernel, made on the plan's first launch

    def bind(self):
        p = self.plan
        self.kernel = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, 0, p.overlap_previous)
        return self.kernel


PLANS = PlanCache()


def rope(x, *, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0, mscale=1.0,
         layout="sbhd", interleaved=False, rotary_dim=None, rotary_offset=0, positions=None, mrope_section=None,
         mrope_interleaved=False, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0, max_seqlen=None, backward=False,
         inplace=False, out=None, stream=None):
    """Rotate features [rotary_offset, rotary_offset + rotary_dim) of every head of ``x`` by position-dependent
    angles.

    x: [s, b, h, d] (layout "sbhd"), [b, s, h, d] ("bshd") or packed [t, h, d] ("thd"), fp32/fp16/bf16,
    any strides, on a CUDA device.
    Angles, exactly one source: ``freqs`` [max_pos, rotary_dim] fp32 angles (sin/cos taken in the kernel);
    ``cos``/``sin`` caches [max_pos, rotary_dim] or [max_pos, rotary_dim/2] in fp32 or x's dtype;
    ``cos_sin_cache`` [max_pos, rotary_dim], the packed table of vLLM, SGLang and FlashInfer (cos of the pairs in
    the first half of a row, their sin in the second), fp32 or x's dtype; ``inv_freq`` [rotary_dim/2] fp32 with
    angle = position * scale * inv_freq[i]; or ``base``, with inv_freq[i] = base ** (-2i / rotary_dim) (the
    frequencies follow rotary_dim, not the head dim). Tables of shape [max_pos, 1, 1, width] are accepted.
    ``mscale``: cos and sin multiplied by it, whatever their source (YaRN's and LongRoPE's attention factor;
    ``cukiln.rope_recipe`` turns a model config's rope parameters into inv_freq, rotary_dim and mscale).
    rotary_dim defaults to the table width (freqs, cos_sin_cache), 2 * len(inv_freq), or d (base); cos/sin tables
    of width w read as full-width (rotary_dim = w) or half-width (2w), and where both fit the head the call must
    give rotary_dim. ``rotary_offset``: the rotated span's first feature (vLLM's rope_dim_offset; MLA's rotary
    part at the end of the head); features outside the span pass through.
    Positions: the index in the sequence plus ``offsets`` (an int or an int tensor [b], one per sequence),
    or explicit ``positions`` ([s] or [b, s] int32/int64, read as given; [t] for thd, which then needs no
    cu_seqlens).
    M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): ``mrope_section=(t, h, w)``, the rotary pairs that take each of a
    token's three positions (t + h + w = rotary_dim / 2), with ``positions`` of shape [3, s] or [3, b, s] ([3, t]
    for thd): time, height and width rows, any strides. Chunked sections by default (pairs [0, t) take the time
    position, [t, t + h) the height, the rest the width: Qwen2-VL's layout); ``mrope_interleaved=True`` interleaves
    them as Qwen3-VL does (pair i takes the height when i % 3 == 1 and i < 3h, the width when i % 3 == 2 and
    i < 3w, else the time). Every angle source, pairing, layout, in place and backward take it.
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
    result goes to ``out`` (allocated like x when None) and the other features are copied over.
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
            or (cos_sin_cache is not None and getattr(cos_sin_cache, "requires_grad", False))
            or (inv_freq is not None and getattr(inv_freq, "requires_grad", False))):
        refuse_untracked_gradients("cukiln.rope", (("x", x), ("out", out), ("freqs", freqs), ("cos", cos),
                                                   ("sin", sin), ("cos_sin_cache", cos_sin_cache),
                                                   ("inv_freq", inv_freq)), "cukiln.torch.rope")
    if x.is_cuda and (out is None or (type(out) is type(x) and not inplace)):  # the native hot path, where it loads
        native = _NATIVE if _NATIVE is not None else _native()
        if native:
            return native(x, None, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout,
                          interleaved, rotary_dim, rotary_offset, positions, mrope_section, mrope_interleaved,
                          offsets, cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace, out, None)
    # Positional: 21 keyword arguments would cost this call about a microsecond.
    return run_rope(x, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
                    rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
                    max_seqlen, backward, inplace, out)


# rope's arguments after x, in order: the one declaration (its signature above) that run_rope, rope_qk, prepare,
# the reference, the torch ops' schemas and cukiln.torch's wrappers follow (tests/runtime/test_signatures.py).
ARGUMENTS = tuple(inspect.signature(rope).parameters)[1:]


def rope_qk(q, k, *, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0,
            mscale=1.0, layout="sbhd", interleaved=False, rotary_dim=None, rotary_offset=0, positions=None,
            mrope_section=None, mrope_interleaved=False, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0,
            max_seqlen=None, backward=False, inplace=False, out=None, stream=None):
    """cukiln.rope on q and k of the same tokens at once: (q_out, k_out). k may differ from q in its head count and
    in every stride (e.g. ``qkv[:, :hq * d].view(t, hq, d)`` and the next slice); each token's angles are computed
    once, for all of its q and k heads, in one launch (dense layouts with the last dim contiguous; packed thd
    sequences and strided last dims take a second launch for k). ``k=None`` rotates q alone (k_out None).
    Every other argument is cukiln.rope's; ``out`` is a pair (q_out, k_out) or None (both allocated).
    """
    if not is_plain_torch_call(q, stream):
        return call_with_foreign_arrays(rope_qk, locals())
    if out is None:
        q_out = k_out = None
    elif isinstance(out, (tuple, list)) and len(out) == 2:
        q_out, k_out = out
    else:
        raise TypeError(f"out: expected a pair (q_out, k_out) or None, got {type(out).__name__}")
    if k is None and k_out is not None:
        raise ValueError("out: k_out given without k")
    if (q.requires_grad or getattr(k, "requires_grad", False) or getattr(q_out, "requires_grad", False)
            or getattr(k_out, "requires_grad", False) or getattr(freqs, "requires_grad", False)
            or getattr(cos, "requires_grad", False) or getattr(sin, "requires_grad", False)
            or getattr(cos_sin_cache, "requires_grad", False) or getattr(inv_freq, "requires_grad", False)):
        refuse_untracked_gradients("cukiln.rope_qk", (("q", q), ("k", k), ("q_out", q_out), ("k_out", k_out),
                                                      ("freqs", freqs), ("cos", cos), ("sin", sin),
                                                      ("cos_sin_cache", cos_sin_cache), ("inv_freq", inv_freq)),
                                   "cukiln.torch.rope_qk")
    if k is not None and q.is_cuda and type(k) is type(q) and (
            q_out is None or (type(q_out) is type(q) and type(k_out) is type(q) and not inplace)):  # as rope's
        native = _NATIVE if _NATIVE is not None else _native()
        if native:
            return native(q, k, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved,
                          rotary_dim, rotary_offset, positions, mrope_section, mrope_interleaved, offsets,
                          cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace, q_out, k_out)
    return run_rope_qk(q, k, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved,
                       rotary_dim, rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens,
                       cp_size, cp_rank, max_seqlen, backward, inplace, q_out, k_out)


def run_rope(x, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
             rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
             max_seqlen, backward, inplace, out):
    """rope() on torch tensors, every argument positional (as rope's signature orders them, less stream):
    the entry for callers that already hold torch tensors, such as the torch ops."""
    cached, values, result, _, copied = prepare(x, None, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale,
                                                mscale, layout, interleaved, rotary_dim, rotary_offset, positions,
                                                mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size,
                                                cp_rank, max_seqlen, backward, inplace, out, None)
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


def run_rope_qk(q, k, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rotary_dim,
                rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
                max_seqlen, backward, inplace, q_out, k_out):
    """rope_qk() on torch tensors, every argument positional (out as q_out, k_out): (q_out, k_out)."""
    cached, values, result, k_result, copied = prepare(q, k, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale,
                                                       mscale, layout, interleaved, rotary_dim, rotary_offset,
                                                       positions, mrope_section, mrope_interleaved, offsets,
                                                       cu_seqlens, cp_size, cp_rank, max_seqlen, backward, inplace,
                                                       q_out, k_out)
    p = cached.plan
    if p is not None:
        stream = _torch._C._cuda_getCurrentRawStream(p.device)
        (cached.kernel or cached.bind())(values[0], stream)
        if cached.then is not None:
            (cached.then.kernel or cached.then.bind())(values[1], stream)
        if inplace or q_out is not None:  # the caller's tensors written (see run_rope)
            _torch._C._increment_version((result,) if k is None else (result, k_result))
    del copied
    return result, k_result


_torch = None  # the torch module, imported by the first call (cukiln itself imports without torch)
# The call through the native hot path (torch_support.public_call), or False where it is off; None until the first call
# that could take it, which loads the torch ops and the extension (runtime/native.py).
_NATIVE = None


def _native():
    global _NATIVE
    from .torch_support import public_call

    _NATIVE = public_call("rope")
    return _NATIVE


def _import_torch():
    global _torch
    import torch

    _torch = torch
    return torch


def plan_call(x, *, rule: dict | None = None, **kwargs) -> tuple[RopePlan | None, object]:
    """Validate a rope() call (the keyword arguments of cukiln.rope) and plan its launch without launching:
    (RopePlan or None when there is nothing to launch, output tensor). ``rule``: the dense launch choices to
    plan with instead of the dispatch table's (as `cukiln tune rope` measures them; the plan is not cached).
    For rope_qk's plans give ``k=`` (and ``k_out=``); the plan's ``then`` is k's own launch where one is needed."""
    k, k_out = kwargs.pop("k", None), kwargs.pop("k_out", None)
    if rule is not None:
        return _plan_uncached(x, k, k_out, rule=rule, **kwargs)
    args = [kwargs.pop(name, default) for name, default in _DEFAULTS]
    if kwargs:
        raise TypeError(f"plan_call: unexpected arguments {sorted(kwargs)}")
    cached, values, out, _, _ = prepare(x, k, *args, k_out)
    p = cached.plan
    if p is None:
        return None, out
    first = values[0] if k is not None else values
    return replace(p, values=tuple(first)), out


_DEFAULTS = tuple((name, p.default) for name, p in inspect.signature(rope).parameters.items()
                  if name not in ("x", "stream"))


def launch_plan(plan: RopePlan) -> None:
    """Launch a plan from plan_call on the current torch stream (measurements: the call's launch, without its
    validation)."""
    torch = _torch or _import_torch()
    kernel(plan.device, plan.module, plan.symbol, plan.fmt, plan.grid, plan.block, 0, plan.overlap_previous)(
        plan.values, torch._C._cuda_getCurrentRawStream(plan.device))


def _plan_uncached(x, k, k_out, *, rule: dict, out=None, inplace=False, **kwargs):
    torch = _torch or _import_torch()
    out = x if inplace else (torch.empty_like(x) if out is None else out)
    if k is not None:
        k_out = k if inplace else (torch.empty_like(k) if k_out is None else k_out)
    tensors = tuple(kwargs.pop(name, None) for name in _TENSOR_ARGS[4:])
    cached = _plan_and_describe((x, out, k, k_out) + tensors, inplace=inplace, fresh=False, cu_host=None,
                                thd_dispatch=OVERRIDES["rope_thd_dispatch"], rule=rule, **kwargs)
    return cached.plan, out


def prepare(x, k, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0, mscale=1.0,
            layout="sbhd", interleaved=False, rotary_dim=None, rotary_offset=0, positions=None, mrope_section=None,
            mrope_interleaved=False, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0, max_seqlen=None,
            backward=False, inplace=False, out=None, k_out=None):
    """Everything of a rope() (k None) or rope_qk() call but the launch: (cached plan (its plan is None when there
    is nothing to launch), parameter values with this call's pointers (for rope_qk one list per launch), x's
    output, k's output, the device copy of host cu_seqlens or None, which must outlive the launch). Runs on every
    call (`cukiln bench overhead` times it alone): the plan-cache hit is written out for speed."""
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
        if k is not None and k_out is not None and k_out is not k:
            raise ValueError("k_out: inplace=True writes k itself; got a different k_out tensor")
        out, k_out = x, k
    elif out is None:
        if k_out is not None:
            raise ValueError("out: give both q_out and k_out, or neither")
        out, fresh = torch.empty_like(x), True
        if k is not None:
            k_out = torch.empty_like(k)
    elif k is not None and k_out is None:
        raise ValueError("out: give both q_out and k_out, or neither")
    others = (freqs, cos, sin, cos_sin_cache, inv_freq, positions, offsets, cu_seqlens)
    # The cache key: everything the plan depends on except pointer values.
    try:
        xp = x.data_ptr()
        pointers = [xp, xp, 0, 0]
        key = [x.shape, x.stride(), x.dtype, x.is_neg(), x.get_device(), xp & ALIGN_MASK, base, scale, mscale, layout,
               interleaved, rotary_dim, rotary_offset, backward, inplace, fresh, cp_size, cp_rank, max_seqlen,
               thd_dispatch, cu_host, mrope_interleaved,
               mrope_section if mrope_section is None or type(mrope_section) is tuple else tuple(mrope_section)]
        if out is not x:
            pointers[1] = op = out.data_ptr()
            if not fresh:
                key += (out.shape, out.stride(), out.dtype, out.is_neg(), out.get_device(), op & ALIGN_MASK, op == xp)
        if k is not None:
            pointers[2] = kp = k.data_ptr()
            pointers[3] = kop = k_out.data_ptr()
            key += (k.shape, k.stride(), k.dtype, k.is_neg(), k.get_device(), kp & ALIGN_MASK)
            if not fresh and not inplace:
                key += (k_out.shape, k_out.stride(), k_out.dtype, k_out.is_neg(), k_out.get_device(),
                        kop & ALIGN_MASK, kop == kp)
        add_tensors(key, pointers, others)
        key = tuple(key)
        cached = PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, unhashable scalars: the full validation explains
        key, cached = None, None
    if cached is None:
        cached = _plan_and_describe((x, out, k, k_out) + others, base=base, scale=scale, mscale=mscale, layout=layout,
                                    interleaved=interleaved, rotary_dim=rotary_dim, rotary_offset=rotary_offset,
                                    mrope_section=mrope_section, mrope_interleaved=mrope_interleaved,
                                    backward=backward, inplace=inplace, fresh=fresh, cu_host=cu_host, cp_size=cp_size,
                                    cp_rank=cp_rank, max_seqlen=max_seqlen, thd_dispatch=thd_dispatch)
        if key is not None:
            PLANS.put(key, cached)
        pointers = [0 if t is None or type(t) is int else t.data_ptr() for t in (x, out, k, k_out) + others]
    p = cached.plan
    if p is None:
        return cached, (), out, k_out, copied
    refill = cached.refill
    if refill.checks:
        _refuse_overlap(refill.overlapping(pointers))
    values = refill.values(p.values, pointers)
    if k is None:
        return cached, values, out, k_out, copied
    then = cached.then
    return cached, (values, None if then is None else then.refill.values(then.plan.values, pointers)), out, k_out, copied


def describe_op(x, k, arguments: tuple, inplace: bool, positions: dict, result, k_result, given: int | None = None):
    """The native hot path's description (runtime/native.py) of a torch op's call just run: x (and k) rotated in
    place, into fresh outputs (``result``, ``k_result``) or, with ``given`` (the argument index of the first of them
    in a variant's arguments), into the caller's outputs; ``arguments`` run_rope's from freqs to backward,
    ``positions`` the op's argument index of each of x, k and the tables. None where a description cannot serve the
    next call with this metadata (host cu_seqlens, whose values the plan checks); False (keep no plan) for an
    output given at x's own address, which the Python plan takes as in place and so checks no overlap with x."""
    from . import native

    cu_seqlens = arguments[ARGUMENTS.index("cu_seqlens")]
    if cu_seqlens is not None and cu_seqlens.device.type == "cpu":
        return None
    if given is not None and (result.data_ptr() == x.data_ptr()
                              or (k is not None and k_result.data_ptr() == k.data_ptr())):
        return False
    outs = (x, k) if inplace else (result, k_result) if given is not None else (None, None)
    cached = prepare(x, k, *arguments, inplace, *outs)[0]
    tensors = (x, result, k, k_result) + tuple(arguments[ARGUMENTS.index(n)] for n in _TENSOR_ARGS[4:])
    sources = []  # per pointer of the plan: (source, index), or None where this call passes no tensor
    for i, name in enumerate(_TENSOR_ARGS):
        if name in ("out", "k_out"):
            sources.append((native.ARGUMENT, positions["x" if name == "out" else "k"]) if inplace else
                           (native.ARGUMENT, given + i // 2) if given is not None else (native.OUTPUT, i // 2))
        elif tensors[i] is None or type(tensors[i]) is int:
            sources.append(None)
        else:
            sources.append((native.ARGUMENT, positions[name]))
    launches = []
    part = cached if cached.plan is not None else None
    while part is not None:
        p, refill = part.plan, part.refill
        launches.append(native.launch_description(part.kernel or part.bind(),
                                                  refill.values(p.values, [0] * len(_TENSOR_ARGS)),
                                                  native.pointer_slots(refill.slots, sources)))
        part = part.then
    rotated = (1,) if k is None else (1, 3)  # the pointers of x's and k's outputs
    fresh = () if inplace or given is not None else (result,) if k is None else (result, k_result)
    written = [sources[i][1] for i in rotated] if inplace or given is not None else []
    returns = range(len(fresh)) if given is None else [-1 - sources[i][1] for i in rotated]
    return native.describe(x.get_device(), launches, outputs=[native.allocation(t) for t in fresh],
                           returns=[] if inplace else returns,
                           overlaps=native.overlap_checks(cached.refill.pairs, sources), bumps=written)


def _refuse_overlap(hit: tuple[int, int] | None) -> None:
    """Pointer-dependent part of the validation: an output must not overlap an input (nor x, unless it is x) or
    the other output."""
    if hit is not None:
        written, name = _TENSOR_ARGS[hit[0]], _TENSOR_ARGS[hit[1]]
        raise ValueError(f"{written}: overlaps {name}" + (
            f" without being exactly {name} (use inplace=True to rotate {name} itself)" if name in ("x", "k")
            else ", which the kernel reads while it writes it"))


def _plan_and_describe(args, *, base=None, scale=1.0, mscale=1.0, layout="sbhd", interleaved=False, rotary_dim=None,
                       rotary_offset=0, mrope_section=None, mrope_interleaved=False, backward=False, inplace=False,
                       fresh=False, cu_host=None, cp_size=1, cp_rank=0, max_seqlen=None, thd_dispatch="auto",
                       rule=None) -> _CachedPlan:
    """Full validation and planning; records where the pointers go so that later calls only refill them."""
    # Only offsets takes an int; an int anywhere else is refused by from_torch (it would be no tensor at all).
    infos = [None if t is None or (name == "offsets" and isinstance(t, int)) else from_torch(t, name, accepts)
             for name, t, accepts in zip(_TENSOR_ARGS, args, _ACCEPTS)]
    x, out, k, k_out = infos[:4]
    tables = dict(zip(_TENSOR_ARGS[4:], infos[4:]))
    offsets = args[_INDEX["offsets"]]
    offsets_arg = offsets if isinstance(offsets, int) or offsets is None else tables["offsets"]
    guarded = tuple((name, info) for name, info in tables.items() if info is not None)
    device = x.device
    plan = plan_rope(x, out, freqs=tables["freqs"], cos=tables["cos"], sin=tables["sin"],
                     cos_sin_cache=tables["cos_sin_cache"], inv_freq=tables["inv_freq"], base=base, scale=scale,
                     mscale=mscale, layout=layout, interleaved=interleaved, rotary_dim=rotary_dim,
                     rotary_offset=rotary_offset, positions=tables["positions"], mrope_section=mrope_section,
                     mrope_interleaved=mrope_interleaved, offsets=offsets_arg,
                     cu_seqlens=tables["cu_seqlens"], cu_seqlens_host=cu_host, cp_size=cp_size, cp_rank=cp_rank,
                     max_seqlen=max_seqlen, thd_dispatch=thd_dispatch, arch=KERNELS.arch(device), backward=backward,
                     inplace=inplace, guarded=guarded, rule=rule, k=k, k_out=k_out, sms=KERNELS.sm_count(device))
    spans = tuple(None if info is None else tuple(b - info.ptr for b in info.byte_span()) for info in infos)
    # Fresh outputs overlap nothing; otherwise each output's current pointer is checked against every other
    # tensor's on each call (x's and k's too, unless written in place: a view of x with other strides is refused).
    in_place = inplace or (out is not None and out.same_view(x))
    written = (1,) if k is None else (1, 3)
    checks = () if fresh else tuple(i for i, span in enumerate(spans)
                                    if span is not None and not (i == 0 and in_place) and not (i == 2 and in_place)
                                    and not (i in written and len(written) == 1))
    windows = {(w, i): window for w in written for i in checks
               if i != w and (window := interleaving(infos[w], infos[i])) is not None}
    if plan is None:
        return _CachedPlan(None, Refill((), spans, checks, written, windows))

    def cached(p: RopePlan) -> _CachedPlan:
        slots = tuple((p.field_names.index(field), _INDEX[arg], add) for field, arg, add in p.pointers)
        return _CachedPlan(p, Refill(slots, spans, checks, written, windows),
                           None if p.then is None else cached(p.then))

    return cached(plan)
