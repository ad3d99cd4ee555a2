"""cukiln.decode_step: one decode step of an attention layer, the new token appended and attended to: kv_append
(RoPE on the new query and key, the rotated key and the value written into the caches at each row's length), then
decode_attention over each row's keys including the new one.

With the lengths on the device and a step that the ws attention serves (sm_90 on, 16-bit caches of head dim 64 or
128, 16-byte rows), the step is one launch of a fused kernel (codegen/decode_step_family.py): each attention block
rotates its own query heads, and the block whose keys end with the new one writes it into the caches first. Else
two launches back to back (on GPUs with programmatic launches the attention is scheduled while the append runs and
waits for its writes). Both give the same bits: the step's attention takes the ws ring where the dispatch table picks
ws_deep, whichever the launches (decode_plan.plan_decode's for_step).
``cukiln.overrides.forced("decode_step_launch", "separate")`` (or CUKILN_DECODE_STEP_LAUNCH) takes the two launches
where the fused one would serve, for checks and measurements.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from cukiln.generated import dispatch

from . import decode_api, kv_append_api
from .decode_api import plan_call as plan_decode_call
from .decode_api import run_decode
from .decode_plan import WS
from .kv_append_api import run_kv_append
from .launch import kernel
from .overrides import CURRENT as OVERRIDES
from .plan_cache import PlanCache, Refill, add_tensors
from .tensors import refuse_untracked_gradients

# The decode calls whose arguments were validated before any append (by their metadata), for steps with lengths
# given on the host: a step validates both launches before it writes anything, and a repeated step skips the
# attention's separate validation.
_VALIDATED = PlanCache()
# Steps with lengths on the device (the serving and CUDA-graph case), by call metadata: both launches planned once.
STEPS = PlanCache()
_torch = None
_NATIVE = None  # the native calls (torch_support.public_call), or False where they are off; None until first needed


def _import_torch():
    global _torch
    import torch

    _torch = torch
    return torch


def _native():
    global _NATIVE
    from .torch_support import public_call

    _NATIVE = public_call("decode_step")
    return _NATIVE

# A step's tensors in kv_append's pointer order (its q_out and kv_lens_out, None here, are the step's workspace),
# then decode's out
_Q_OUT, _LENS_OUT, _OUT = 1, 14, 17
_WORKSPACE_ALIGN = 256


@dataclass
class _Step:
    """A step planned once: the append's and the attention's cached plans, the fused kernel (bound) where the build
    has one for them, the overlap checks of the step's pointers (its tensors in kv_append's order, then out), and
    where the rotated query, the new lengths and the attention's partial results lie in the step's one workspace
    allocation (a fused step keeps only the partial results there)."""

    append: object  # kv_append_api._CachedPlan
    attention: object  # decode_api._CachedPlan
    lens_offset: int
    partial_offset: int | None  # None: no partial results (an attention without split-KV, or merged in clusters)
    partial_lse_offset: int
    workspace_bytes: int
    checks: Refill
    fused: object = None  # launch.Kernel

    @classmethod
    def lay_out(cls, append, attention, q, checks: Refill, fused=None) -> "_Step":
        """The workspace: the rotated query and the new lengths (two launches only), then a split attention's
        partial outputs and log-sum-exps (fp32), each at a multiple of _WORKSPACE_ALIGN bytes."""
        def aligned(n: int) -> int:
            return -(-n // _WORKSPACE_ALIGN) * _WORKSPACE_ALIGN

        lens = 0 if fused else aligned(q.numel() * q.element_size())
        after_lens = 0 if fused else aligned(lens + 4 * q.shape[0])
        if attention.combine is None:  # one pass: no partial results
            return cls(append, attention, lens, None, 0, after_lens, checks, fused)
        p = attention.plan
        partials = p.batch * p.heads_q * p.num_splits
        partial_lse = aligned(after_lens + partials * p.head_dim * 4)
        return cls(append, attention, lens, after_lens, partial_lse, partial_lse + partials * 4, checks, fused)


def decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, positions=None,
                freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, rope_scale=1.0,
                mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0, q_norm_weight=None,
                k_norm_weight=None, norm_eps=1e-6, scale=None, softcap=None, num_splits=None, advance_lens=False,
                out=None, return_lse=False):
    """Append each row's new token to the caches (rotated by RoPE, at slot kv_lens[i]) and attend to keys
    [kv_start[i], kv_lens[i] + 1) with the rotated query: the attention output [b, h_q, d] (and its log-sum-exp
    with ``return_lse``).

    q: [b, h_q, d] (one new token a row), k_new, v_new: [b, h_kv, d], caches and lengths as cukiln.kv_append and
    cukiln.decode_attention take them. The RoPE and QK-norm arguments are kv_append's, with its ``scale`` named
    ``rope_scale`` here; ``scale`` (default 1/sqrt(d)), ``softcap``, ``num_splits``, ``out`` and ``return_lse`` are
    decode_attention's. kv_lens: an int32 [b] tensor on the device (what a captured CUDA graph wants), an int32
    CPU tensor (checked, then copied over) or an int. ``advance_lens=True`` adds 1 to kv_lens after the step (on the
    device for a device tensor: a graph replays step after step with no host work; in place for a CPU tensor; an
    int cannot be advanced). Every argument of both launches is validated before anything is written; lengths on
    the device are not read back (a row that does not fit writes nothing and gets NaN, as both ops report it).
    """
    torch = _torch or _import_torch()
    if (q.requires_grad or getattr(k_new, "requires_grad", False) or getattr(v_new, "requires_grad", False)
            or getattr(out, "requires_grad", False)):
        refuse_untracked_gradients("cukiln.decode_step", (("q", q), ("k_new", k_new), ("v_new", v_new), ("out", out)))
    if ((out is None or type(out) is type(q)) and not advance_lens and type(kv_lens) is torch.Tensor and kv_lens.is_cuda
            and q.is_cuda
            and (kv_start is None or type(kv_start) is int or (type(kv_start) is torch.Tensor and kv_start.is_cuda))):
        callers = _NATIVE if _NATIVE is not None else _native()  # the native hot path, where it loads
        if callers:  # the op's arguments (kv_start as a tensor or None, and an int), then the caller's out
            start_tensor, start = (kv_start, 0) if type(kv_start) is torch.Tensor else (None, kv_start or 0)
            call = callers[out is not None, bool(return_lse)]
            arguments = (q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, start_tensor, start, positions, freqs,
                         cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim,
                         rotary_offset, q_norm_weight, k_norm_weight, norm_eps, scale, softcap, num_splits, False)
            result = call(*arguments) if out is None else call(*arguments, out)
            return result if return_lse else result[0]
    return run_decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, freqs, cos,
                           sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim,
                           rotary_offset, q_norm_weight, k_norm_weight, norm_eps, scale, softcap, num_splits,
                           advance_lens, out, return_lse)


# decode_step()'s keyword defaults (plan_call takes the same keywords)
_DEFAULTS = {n: p.default for n, p in inspect.signature(decode_step).parameters.items()
             if p.kind is p.KEYWORD_ONLY and n not in ("out", "return_lse", "advance_lens")}


def run_decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, freqs, cos, sin,
                    cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset,
                    q_norm_weight, k_norm_weight, norm_eps, scale, softcap, num_splits, advance_lens, out, return_lse):
    """decode_step() in Python, every argument positional (its signature's order), gradients already refused: the
    entry of the torch op's kernel."""
    torch = _torch or _import_torch()
    if q.ndim != 3:
        raise ValueError(f"q: expected [b, h_q, d] (one new token a row), got shape {list(q.shape)}")
    if type(kv_lens) is torch.Tensor and kv_lens.is_cuda and (kv_start is None or type(kv_start) is int
                                                               or (type(kv_start) is torch.Tensor and kv_start.is_cuda)):
        tensors = (q, None, k_new, v_new, k_cache, v_cache, kv_lens, kv_start, positions, freqs, cos, sin,
                   cos_sin_cache, inv_freq, None, q_norm_weight, k_norm_weight, out)
        key = [kv_layout, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset, norm_eps, scale, softcap,
               num_splits, return_lse, advance_lens, OVERRIDES["decode_pipeline"], OVERRIDES["decode_step_launch"]]
        pointers = []
        try:
            add_tensors(key, pointers, tensors)
            key = tuple(key)
            step = STEPS.get(key)
        except (AttributeError, TypeError):  # not tensors, unhashable scalars: the planning explains
            key = step = None
        if step is None:
            step = _plan_step(tensors, kv_layout, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset,
                              norm_eps, scale, softcap, num_splits, return_lse)
            if key is not None:
                STEPS.put(key, step)
            pointers = [0 if t is None or type(t) is int else t.data_ptr() for t in tensors]
        return _run_step(step, pointers, q, k_cache, v_cache, kv_lens, kv_start, out, return_lse, advance_lens, torch)
    device_lens = isinstance(kv_lens, torch.Tensor) and kv_lens.device.type != "cpu"
    if advance_lens and not isinstance(kv_lens, torch.Tensor):
        raise ValueError("advance_lens: kv_lens is an int, which cannot be advanced in place; give an int32 tensor")
    if device_lens:
        lens_after = torch.empty_like(kv_lens)  # written by the append: kv_lens + 1
    elif isinstance(kv_lens, torch.Tensor):
        lens_after = kv_lens + 1  # host values: checked by both ops, copied over by each
    else:
        lens_after = kv_lens + 1 if type(kv_lens) is int else kv_lens
    _validate_attention(q, k_cache, v_cache, lens_after, kv_layout, kv_start, scale, softcap, num_splits, out,
                        return_lse)
    q_rot = run_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions,
                          lens_after if device_lens else None, freqs, cos, sin, cos_sin_cache, inv_freq, base,
                          rope_scale, mscale, interleaved, rotary_dim, rotary_offset, q_norm_weight, k_norm_weight,
                          norm_eps, False, None)
    result = run_decode(q_rot, k_cache, v_cache, lens_after, kv_layout, kv_start, scale, softcap, num_splits, out,
                        return_lse, for_step=True)  # a step's attention: the fused one's ring
    if advance_lens and device_lens:
        kv_lens.copy_(lens_after)
    elif advance_lens:
        kv_lens.add_(1)
    return result


def plan_call(q, k_new, v_new, k_cache, v_cache, kv_lens, *, out=None, return_lse=False, **kwargs) -> _Step:
    """Validate a decode_step() call with lengths on the device and plan it without launching (for checks and
    measurements): its _Step (``.fused``: its one launch, or None where it takes two)."""
    a = {**_DEFAULTS, **kwargs}
    unknown = set(kwargs) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"plan_call: unexpected arguments {sorted(unknown)}")
    tensors = (q, None, k_new, v_new, k_cache, v_cache, kv_lens, a["kv_start"], a["positions"], a["freqs"], a["cos"],
               a["sin"], a["cos_sin_cache"], a["inv_freq"], None, a["q_norm_weight"], a["k_norm_weight"], out)
    return _plan_step(tensors, a["kv_layout"], a["base"], a["rope_scale"], a["mscale"], a["interleaved"],
                      a["rotary_dim"], a["rotary_offset"], a["norm_eps"], a["scale"], a["softcap"], a["num_splits"],
                      return_lse)


def _plan_step(tensors, kv_layout, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset, norm_eps, scale,
               softcap, num_splits, return_lse) -> _Step:
    """Validate and plan both launches of a step with device lengths (nothing is written), on stand-ins for the
    workspace's rotated query and new lengths."""
    torch = _torch or _import_torch()
    q, kv_lens, kv_start, out = tensors[0], tensors[6], tensors[7], tensors[_OUT]
    q_rot, lens_after = torch.empty_like(q), torch.empty_like(kv_lens)
    attention, _ = decode_api.describe(q_rot, tensors[4], tensors[5], lens_after, kv_layout, kv_start, scale, softcap,
                                       num_splits, out, return_lse, for_step=True)
    args = list(tensors[:_OUT])
    args[_Q_OUT], args[_LENS_OUT] = q_rot, lens_after
    append = kv_append_api.describe(tuple(args), kv_layout=kv_layout, base=base, scale=rope_scale, mscale=mscale,
                                    interleaved=interleaved, rotary_dim=rotary_dim, rotary_offset=rotary_offset,
                                    norm_eps=norm_eps, inplace=False, fresh=True, kv_lens_host=None,
                                    kv_start_host=None, fresh_lens_out=True)
    # the caches and out are written while every input is read (the fused kernel writes out while other blocks still
    # read q, k_new and v_new): each against every input, whichever launches serve the step, so that what a step
    # refuses does not depend on the build
    spans = append.refill.spans + (attention.attention.spans[decode_api.PER_CALL.index("out")],)
    written = append.refill.written + ((_OUT,) if spans[_OUT] is not None else ())
    checks = Refill((), spans, append.refill.checks, written)
    return _Step.lay_out(append, attention, q, checks, _fuse(append, attention))


def _fuse(append, attention):
    """The fused kernel (bound) of a step planned as ``append`` and ``attention``, where the build has one for them (a
    ws attention, an append of vectors as wide as the fused rotation's: decode_step_family's space) and the override
    allows it; else None. The override "fused" on a step that no fused kernel serves raises, naming why."""
    choice = OVERRIDES["decode_step_launch"]
    if choice not in ("auto", "fused", "separate"):
        raise ValueError(f"CUKILN_DECODE_STEP_LAUNCH: expected fused, separate or auto, got {choice!r}")
    if choice == "separate":
        return None
    a, p = append.plan, attention.plan
    entry = why = None
    if a is None or attention.empty:
        why = "it has no rows"
    elif p.key[-1] != WS:
        why = f"its attention takes the {p.key[-1]} pipeline, not ws (sm_90 on, head dims 64 and 128, 16-byte rows)"
    else:
        dtype, pairing, angles, vec, norm = a.key
        entry = dispatch.DECODE_STEP.get((dtype, p.head_dim, pairing, angles, norm))
        width = dispatch.DECODE_STEP_VEC.get(angles)
        # the fused rotation's accesses need that alignment, and a source whose arithmetic follows the width that
        # width
        if entry is None or vec < width or (angles in dispatch.DECODE_STEP_SAME_WIDTH and vec != width):
            entry, why = None, (f"its append rotates {vec} elements at a time, where the fused kernel for {angles} "
                                f"angles takes {width}" + ("" if angles in dispatch.DECODE_STEP_SAME_WIDTH else
                                                          " or more"))
    if entry is None:
        if choice == "fused":
            raise ValueError(f"decode_step_launch=fused: this step has no fused kernel: {why}")
        return None
    module, symbol, layout = entry
    fmt = dispatch.DECODE_STEP_PARAMS[layout][1]
    launch = p.attention
    return kernel(p.device, module, symbol, fmt, launch.grid, launch.block, launch.shared, launch.overlap_previous,
                  launch.cluster)


def _run_step(step: _Step, pointers: list, q, k_cache, v_cache, kv_lens, kv_start, out, return_lse, advance_lens,
              torch):
    """One planned step (its pointers refilled from ``pointers``, in the step's tensor order): the fused launch, or
    the append into the workspace and the attention reading it; then the combine where the plan has one, and the
    outputs."""
    append, attention, fused = step.append, step.attention, step.fused
    workspace = torch.empty(step.workspace_bytes, dtype=torch.uint8, device=q.device) if step.workspace_bytes else None
    base = 0 if workspace is None else workspace.data_ptr()
    if fused is None:
        pointers[_Q_OUT], pointers[_LENS_OUT] = base, base + step.lens_offset
    result = torch.empty(attention.out_shape, dtype=q.dtype, device=q.device) if out is None else out
    lse = torch.empty(attention.lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    start = 0 if kv_start is None else kv_start
    partial = step.partial_offset is not None
    # the attention's query and lengths: the rotated query and the new lengths in the workspace, or (fused: its
    # blocks rotate the query themselves and add the new token to the lengths) none and the lengths before the step
    per_call = [0 if fused else base, pointers[4], pointers[5], pointers[6] if fused else base + step.lens_offset,
                pointers[7], result.data_ptr(), 0 if lse is None else lse.data_ptr(),
                base + step.partial_offset if partial else 0, base + step.partial_lse_offset if partial else 0, 0,
                start if type(start) is int else 0]
    # the overlap checks (skipped while the caller's pointers repeat), before anything launches
    overlap = step.checks.overlapping(pointers) if step.checks.checks else None
    if overlap is not None:
        names = kv_append_api.TENSOR_ARGS + ("out",)
        raise ValueError(f"{names[overlap[0]]}: overlaps {names[overlap[1]]}")
    stream = torch._C._cuda_getCurrentRawStream(attention.device)
    if fused is not None:
        fused(attention.attention_values(per_call) + append.refill.values(append.plan.values, pointers), stream)
        if attention.combine is not None:
            (attention.kernels or attention.bind())[1](attention.combine.values(attention.templates[1], per_call),
                                                      stream)
        if out is not None:
            torch._C._increment_version((out,))
    else:
        if append.plan is not None:
            (append.kernel or append.bind())(append.refill.values(append.plan.values, pointers), stream)
        decode_api.launch_planned(attention, per_call, torch, out, checked=True)
    torch._C._increment_version((k_cache, v_cache))
    if advance_lens and fused is not None:
        kv_lens.add_(1)  # what the append writes as the new lengths
    elif advance_lens:
        kv_lens.copy_(workspace[step.lens_offset:step.lens_offset + 4 * kv_lens.numel()].view(torch.int32))
    del workspace  # kept alive until every launch reading it is queued (the caching allocator orders reuse by stream)
    return (result, lse) if return_lse else result


# cukiln::decode_step's argument index of each tensor of the step (kv_append_api.TENSOR_ARGS' names)
OP_POSITIONS = {"q": 0, "k_new": 1, "v_new": 2, "k_cache": 3, "v_cache": 4, "kv_lens": 5, "kv_start": 7,
                "positions": 9, "freqs": 10, "cos": 11, "sin": 12, "cos_sin_cache": 13, "inv_freq": 14,
                "q_norm_weight": 21, "k_norm_weight": 22}


def describe_op(args: tuple, result, lse, given: int | None = None) -> dict | None:
    """The native hot path's description (runtime/native.py) of a cukiln::decode_step call just run on the op's
    ``args`` (its outputs ``result``, ``lse``, lse None where a variant's call did not ask for it; with ``given``,
    result is the caller's out, at that argument index of a variant's arguments): the fused launch, or the append and
    the attention reading the step's workspace (which the C++ side allocates per call), then the combine where the
    splits outnumber a cluster. None where the step is not the planned device-lengths one, or advances kv_lens (an
    add after the kernels, which the Python path makes)."""
    from . import native

    (q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, start_tensor, start_int, positions, freqs, cos, sin,
     cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset, q_norm_weight,
     k_norm_weight, norm_eps, scale, softcap, num_splits, advance_lens) = args[:28]
    if advance_lens or not kv_lens.is_cuda or (start_tensor is not None and not start_tensor.is_cuda):
        return None
    kv_start = start_int if start_tensor is None else start_tensor
    tensors = (q, None, k_new, v_new, k_cache, v_cache, kv_lens, kv_start, positions, freqs, cos, sin, cos_sin_cache,
               inv_freq, None, q_norm_weight, k_norm_weight, None if given is None else result)
    step = _plan_step(tensors, kv_layout, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset, norm_eps,
                      scale, softcap, num_splits, lse is not None)
    append, attention, fused = step.append, step.attention, step.fused
    out_source, lse_source, outputs, returns = native.results(result, lse, given)
    workspace = (native.SCRATCH, 0)
    sources = kv_append_api.sources_of(tensors[:_OUT], OP_POSITIONS, {} if fused else {
        "q_out": (*workspace, 0), "kv_lens_out": (*workspace, step.lens_offset)})
    append_values = None if append.plan is None else append.refill.values(append.plan.values, [0] * _OUT)
    append_slots = None if append.plan is None else native.pointer_slots(append.refill.slots, sources)
    launches = [] if fused or append.plan is None else [native.launch_description(append.kernel or append.bind(),
                                                                                  append_values, append_slots)]
    if not attention.empty:
        per_call = {"k": sources[4], "v": sources[5], "kv_start": sources[7], "out": out_source, "lse": lse_source,
                    # the two-launch step's attention reads the rotated query and the new lengths in the workspace
                    **({"kv_lens": sources[6]} if fused else {"q": (*workspace, 0),
                                                              "kv_lens": (*workspace, step.lens_offset)})}
        if step.partial_offset is not None:
            per_call.update(partial_out=(*workspace, step.partial_offset),
                            partial_lse=(*workspace, step.partial_lse_offset))
        values = [0] * len(decode_api.PER_CALL)
        values[-1] = kv_start if type(kv_start) is int else 0
        attention_sources = [per_call.get(n) for n in decode_api.PER_CALL]
        described = decode_api.launch_descriptions(attention, attention_sources, values, {})
        if fused:  # one launch: the attention's fields, then the append's
            att_values, att_slots, numbers, maps = decode_api.launch_parts(
                attention, attention.attention, attention.templates[0], attention_sources, values, {})
            shift = len(att_values)
            described[0] = native.launch_description(
                fused, att_values + append_values,
                att_slots + [(f + shift, *rest) for f, *rest in append_slots], numbers, maps)
        launches += described
    overlaps = native.overlap_checks(step.checks.pairs, sources + [out_source])
    written = (OP_POSITIONS["k_cache"], OP_POSITIONS["v_cache"]) + (() if given is None else (given,))
    scratch = [((step.workspace_bytes,), (1,), native.UINT8)] if step.workspace_bytes else []
    return native.describe(attention.device, launches, outputs=outputs, scratch=scratch, returns=returns,
                           overlaps=overlaps, bumps=written)


def _validate_attention(q, k_cache, v_cache, lens, kv_layout, kv_start, scale, softcap, num_splits, out,
                        return_lse) -> None:
    """The attention's own validation, before the append writes anything (once per call metadata)."""
    torch = _torch or _import_torch()
    try:
        key = tuple((t.shape, t.stride(), t.dtype, t.get_device()) if isinstance(t, torch.Tensor) else t
                    for t in (q, k_cache, v_cache, lens, kv_start, out)) + (kv_layout, scale, softcap, num_splits,
                                                                             return_lse)
        if isinstance(lens, torch.Tensor) and lens.device.type == "cpu":
            key = None  # host values: checked on every call
        elif _VALIDATED.get(key):
            return
    except TypeError:  # unhashable arguments: the validation explains
        key = None
    plan_decode_call(q, k_cache, v_cache, lens, kv_layout=kv_layout, kv_start=kv_start, scale=scale, softcap=softcap,
                     num_splits=num_splits, out=out, return_lse=return_lse)
    if key is not None:
        _VALIDATED.put(key, True)


def reference_decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None,
                          positions=None, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None,
                          rope_scale=1.0, mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0,
                          q_norm_weight=None, k_norm_weight=None, norm_eps=1e-6, scale=None, softcap=None,
                          num_splits=None, advance_lens=False, out=None, return_lse=False):
    """float64 decode_step: the float64 kv_append (writing the caches), then the float64 decode attention over each
    row's keys including the new one. ``num_splits`` is ignored (it changes no result)."""
    import torch

    from . import reference
    from .kv_append_api import reference_kv_append

    q_rot = reference_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout=kv_layout, kv_start=kv_start,
                                positions=positions, freqs=freqs, cos=cos, sin=sin, cos_sin_cache=cos_sin_cache,
                                inv_freq=inv_freq, base=base, scale=rope_scale, mscale=mscale,
                                interleaved=interleaved, rotary_dim=rotary_dim, rotary_offset=rotary_offset,
                                q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight, norm_eps=norm_eps)
    lens_after = torch.as_tensor(kv_lens).to(torch.int32) + 1
    # the attention reads the rotated query as the append stores it, in q's dtype (as the rotated keys in the cache)
    result = reference.decode_attention(q_rot.to(q.dtype), k_cache, v_cache, lens_after.to(q.device), kv_layout=kv_layout,
                                        kv_start=kv_start, scale=scale, softcap=softcap, out=out,
                                        return_lse=return_lse)
    if advance_lens:
        kv_lens.add_(1)
    return result
