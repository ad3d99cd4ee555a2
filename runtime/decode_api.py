"""cukiln.decode_attention: one query token per row over a fixed-capacity KV cache, read in place.

The per-call path is the one every op shares (plan_cache.py): a call whose metadata (shapes, strides, dtypes,
devices, pointer alignment, scalar arguments) was seen before takes its validated plan, refills the pointers
and the integer lengths (re-checked against the cache's capacity), allocates the outputs and launches.
"""

from __future__ import annotations

from dataclasses import dataclass

from cukiln.generated import dispatch

from .decode_plan import PIPELINES, WARP_SPECIALIZED, WS, DecodePlan, check_host_lengths, check_lengths, plan_decode
from .driver import tensor_map
from .interop import call_with_foreign_arrays, is_plain_torch_call
from .launch import kernel
from .loader import KERNELS
from .overrides import CURRENT as OVERRIDES
from .plan_cache import ALIGN_MASK, PlanCache, Refill, slots_for
from .tensors import HALVES, from_torch, refuse_untracked_gradients

# What a call fills into a cached plan's parameters, in a fixed order: pointers, then the integer lengths (the
# kernel-parameter field of each is its name).
PER_CALL = ("q", "k", "v", "kv_lens", "kv_start", "out", "lse", "partial_out", "partial_lse", "kv_len",
            "kv_start_value")
_NAMES = ("q", "k_cache", "v_cache", "kv_lens", "kv_start", "out")  # the tensors, as the API names them
_OUT = PER_CALL.index("out")


# Tensor maps a ws plan keeps, by (K, V) pointers: a decode loop passes the same caches call after call.
_MAX_TENSOR_MAPS = 64


@dataclass
class _CachedPlan:
    plan: DecodePlan
    templates: tuple[tuple, tuple]  # the attention and combine kernels' parameter values, pointers unset
    attention: Refill
    combine: Refill | None
    kernels: tuple = ()  # the bound launch.Kernels (attention, then combine), made on the first launch

    def __post_init__(self) -> None:  # what the hit path reads, flattened
        p = self.plan
        self.device, self.capacity, self.empty = p.device, p.fields["capacity"], p.batch * p.heads_q == 0
        self.out_shape, self.lse_shape = (p.batch, p.heads_q, p.head_dim), (p.batch, p.heads_q)
        self.maps = {} if p.key[-1] in WARP_SPECIALIZED else None  # (k pointer, v pointer) -> their tensor maps

    def attention_values(self, per_call) -> list:
        """The attention kernel's parameter values for this call (``per_call`` in PER_CALL's order); a ws plan's
        tensor maps of this call's caches first (its first two fields)."""
        values = self.attention.values(self.templates[0], per_call)
        if self.maps is not None:
            values[0], values[1] = self.maps.get((per_call[1], per_call[2])) or self._new_maps(per_call[1], per_call[2])
        return values

    def _new_maps(self, k_ptr: int, v_ptr: int) -> tuple[bytes, bytes]:
        maps = tensor_maps(self.plan, k_ptr, v_ptr)
        if len(self.maps) >= _MAX_TENSOR_MAPS:
            self.maps.clear()
        self.maps[k_ptr, v_ptr] = maps
        return maps

    def bind(self) -> tuple:
        p = self.plan
        self.kernels = tuple(kernel(p.device, launch.module, launch.symbol, launch.fmt, launch.grid, launch.block,
                                    launch.shared, launch.overlap_previous, launch.cluster)
                             for launch in (p.attention, p.combine) if launch is not None)
        return self.kernels


def tensor_maps(plan: DecodePlan, k_ptr: int, v_ptr: int) -> tuple[bytes, bytes]:
    """A ws plan's tensor maps (d, T, h_kv, b) of the K and V caches at these pointers: boxes of one tile's keys x 64
    columns in the 128-byte swizzle, as attend_ws loads them."""
    f = plan.fields
    itemsize = 2  # fp16 / bf16
    dims = (plan.head_dim, f["capacity"], plan.heads_q // f["group"], plan.batch)
    box = (64, dispatch.DECODE_TILE_KEYS[WS], 1, 1)
    return tuple(tensor_map(plan.key[0], ptr, dims, tuple(f[f"{c}_{s}"] * itemsize for s in ("st", "sh", "sb")), box)
                 for c, ptr in (("k", k_ptr), ("v", v_ptr)))


def launch_values(plan: DecodePlan, *, out: int, lse: int, partial_out: int = 0, partial_lse: int = 0):
    """(attention values, combine values) of ``plan`` with these output and workspace pointers, as a bare launch of
    its kernels needs them: DecodePlan.values, with a ws plan's tensor maps of the plan's own caches."""
    attention, combine = plan.values(out=out, lse=lse, partial_out=partial_out, partial_lse=partial_lse)
    if plan.key[-1] in WARP_SPECIALIZED:
        attention = tensor_maps(plan, plan.fields["k"], plan.fields["v"]) + attention[2:]
    return attention, combine


PLANS = PlanCache()


def decode_attention(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
                     num_splits=None, out=None, return_lse=False, batch_invariant=False, stream=None):
    """Attention of one query token per row over keys [kv_start, kv_lens) of that row's KV cache.

    q: [b, h_q, d] (or [b, 1, h_q, d] / [b, h_q, 1, d]), fp16 or bf16, any strides.
    k_cache, v_cache: [b, h_kv, T, d] (kv_layout "bhsd") or [b, T, h_kv, d] ("bshd") of q's dtype, any
    strides: typically a slice [:, :, :T] of a larger preallocated buffer, read in place, never copied.
    h_q must be a multiple of h_kv (GQA: query head i reads KV head i // (h_q / h_kv)); every query head
    of a KV head is served from one read of it (groups of up to 16; larger groups read it once per 16).
    kv_lens: an int, or an int32 [b] tensor (on q's device; a CPU tensor is checked and copied over):
    row i attends to keys [kv_start[i], kv_lens[i]). kv_start (int or int32 [b], default 0): left padding
    or a sliding window. A row with no keys gives zeros and log-sum-exp -inf. On-device lengths cannot be
    checked without a synchronization: a row whose kv_lens exceeds T, or whose kv_start is negative or
    beyond its kv_lens, gives NaN (output and lse).
    scale: logit scale, default 1/sqrt(d); softcap: logits become softcap * tanh(logit / softcap).
    num_splits: split-KV count (default: the tuned rule of the dispatch table for this GPU, which also
    picks the K/V pipeline per grid). A count given runs the narrow pipeline, which may be slower than the
    table's choice on small grids; ``CUKILN_DECODE_PIPELINE=narrow|deep|wide|ws|ws_deep`` (or
    ``cukiln.overrides.forced("decode_pipeline", name)``) forces a pipeline, for checks and measurements.
    out: q-shaped output (allocated when None). return_lse: also return the natural-log log-sum-exp of
    the scaled logits, fp32 [b, h_q].
    batch_invariant: each row's result depends on that row's inputs and lengths alone, the same bits whatever
    the batch, the other rows' lengths or the cache's capacity (reproducible greedy decoding as a serving batch
    changes): a row is split by its own key count (one split up to 2048 keys, two up to 8192, sixteen beyond),
    never by the grid, on the ws pipeline from sm_90 on (deep or narrow before; their 64-key tiles give the same
    bits). Far slower than the tuned choice for a lone row of up to 8192 keys, which the tuned choice spreads over
    many more blocks. Not with num_splits.
    Runs on the current torch stream without synchronizing (``stream=`` picks another); CUDA-graph
    capturable. CuPy, JAX or any ``__dlpack__`` / ``__cuda_array_interface__`` arrays are taken without a
    copy and the results come back in q's framework (see cukiln.interop).
    Not differentiable: with grad mode on, q, k_cache, v_cache or out requiring grad is refused.
    """
    if not is_plain_torch_call(q, stream):  # other frameworks' arrays, or a stream named
        return call_with_foreign_arrays(decode_attention, locals())
    if (q.requires_grad or getattr(k_cache, "requires_grad", False) or getattr(v_cache, "requires_grad", False)
            or getattr(out, "requires_grad", False)):
        refuse_untracked_gradients("cukiln.decode_attention",
                                   (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out)))
    if ((out is None or type(out) is type(q)) and q.is_cuda and type(k_cache) is type(q) and type(v_cache) is type(q)
            and (type(kv_lens) is int or type(kv_lens) is type(q))
            and (kv_start is None or type(kv_start) is int or type(kv_start) is type(q))):
        native = _NATIVE if _NATIVE is not None else _native()  # the native hot path, where it loads
        if native:
            return native(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out,
                          return_lse, batch_invariant)
    return run_decode(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse,
                      batch_invariant)


_torch = None  # the torch module, imported by the first call (cukiln itself imports without torch)
_NATIVE = None  # the native call (torch_support.public_call), or False where it is off; None until first needed


def _native():
    global _NATIVE
    from .torch_support import public_call

    _NATIVE = public_call("decode_attention")
    return _NATIVE


def _import_torch():
    global _torch
    import torch

    _torch = torch
    return torch


def _lengths_key(value, torch):
    """(key part, pointer, scalar) of a kv_lens / kv_start that is not an int; None for a CPU tensor (its values
    are checked on every call, so such a call is planned in full) or anything else (the planner explains it)."""
    if value is None:
        return "int", 0, 0
    if type(value) is torch.Tensor and value.is_cuda:
        ptr = value.data_ptr()
        return (value.shape, value.stride(), value.dtype, value.get_device(), ptr & ALIGN_MASK), ptr, 0
    return None


def run_decode(q, k_cache, v_cache, kv_lens, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
               num_splits=None, out=None, return_lse=False, batch_invariant=False, *, for_step=False):
    """decode_attention() on torch tensors, every argument positional (as its signature orders them, less
    stream): the entry for callers that already hold torch tensors, such as the torch ops. Runs on every call:
    the plan-cache hit is written out for speed. ``for_step``: a decode step's attention (decode_plan.plan_decode)."""
    torch = _torch or _import_torch()
    lens = ("int", 0, kv_lens) if type(kv_lens) is int else _lengths_key(kv_lens, torch)
    start = ("int", 0, kv_start) if type(kv_start) is int else _lengths_key(kv_start, torch)
    cached = key = None
    if lens is not None and start is not None:
        try:
            qp, kp, vp = q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr()
            # q's alignment does not enter the plan (q is read element by element); K/V's sets the copy width
            key = (q.shape, q.stride(), q.dtype, q.is_neg(), q.get_device(),
                   k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.is_neg(), k_cache.get_device(),
                   kp & ALIGN_MASK, v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.is_neg(),
                   v_cache.get_device(), vp & ALIGN_MASK, lens[0], start[0], kv_layout, scale, softcap, num_splits,
                   return_lse, batch_invariant, for_step, OVERRIDES["decode_pipeline"],
                   None if out is None else (out.shape, out.stride(), out.dtype, out.is_neg(), out.get_device(),
                                             out.data_ptr() & ALIGN_MASK))
            cached = PLANS.get(key)
        except (AttributeError, TypeError):  # not tensors, unhashable scalars: the full validation explains
            key = None
    if cached is None:
        return _run_planned(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out,
                            return_lse, batch_invariant, key, for_step)
    if lens[0] == "int" or start[0] == "int":
        check_lengths(lens[2], start[2], cached.capacity, lens[0] != "int", start[0] != "int")
    result = torch.empty(q.shape, dtype=q.dtype, device=q.device) if out is None else out
    lse = torch.empty(cached.lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    per_call = [qp, kp, vp, lens[1], start[1], result.data_ptr(), 0 if lse is None else lse.data_ptr(), 0, 0,
                lens[2], start[2]]
    if cached.combine is None and cached.kernels:  # one kernel, bound: the common case, written out
        refill = cached.attention
        if refill.checks:
            refuse_overlap(refill.overlapping(per_call))
        cached.kernels[0](cached.attention_values(per_call), torch._C._cuda_getCurrentRawStream(cached.device))
        if out is not None:
            torch._C._increment_version((out,))
    else:
        launch_planned(cached, per_call, torch, out)
    return (result, lse) if return_lse else result


def refuse_overlap(hit: tuple[int, int] | None) -> None:
    if hit is not None:
        raise ValueError(f"out: overlaps {_NAMES[hit[1]]}, which the kernel reads while it writes out")


def launch_planned(cached: _CachedPlan, per_call: list, torch, written=None, checked: bool = False) -> None:
    """The cached plan's kernels with this call's pointers and lengths (``per_call``, in PER_CALL's order);
    ``written``: the caller's out, whose version is bumped (written behind autograd's back, as rope does). A split
    plan's partial results go to a workspace allocated here, unless per_call already points at one (a caller's
    [batch, heads_q, num_splits] partial outputs and log-sum-exps: decode_step's). ``checked``: the caller has
    made the overlap checks."""
    if cached.empty:
        return
    attention = cached.attention
    if attention.checks and not checked:
        refuse_overlap(attention.overlapping(per_call))
    partial = None
    if cached.combine is not None and not per_call[7]:  # split-KV merged by the combine kernel: partial results
        p = cached.plan
        shape = (p.batch, p.heads_q, p.num_splits)
        partial = (torch.empty(shape + (p.head_dim,), dtype=torch.float32, device=f"cuda:{p.device}"),
                   torch.empty(shape, dtype=torch.float32, device=f"cuda:{p.device}"))
        per_call[7], per_call[8] = partial[0].data_ptr(), partial[1].data_ptr()
    kernels = cached.kernels or cached.bind()
    stream = torch._C._cuda_getCurrentRawStream(cached.device)
    kernels[0](cached.attention_values(per_call), stream)
    if cached.combine is not None:
        kernels[1](cached.combine.values(cached.templates[1], per_call), stream)
    if written is not None:
        torch._C._increment_version((written,))
    del partial  # kept alive until both launches are queued (the caching allocator orders reuse by stream)


def describe(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse,
             batch_invariant=False, for_step=False):
    """Validate and plan a call: (its _CachedPlan, the tensors to keep alive until its launch is queued).
    ``for_step``: a decode step's attention (decode_plan.plan_decode)."""
    plan, infos, keep = _plan(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out,
                              return_lse, batch_invariant, for_step)
    spans = tuple(None if info is None else tuple(x - info.ptr for x in info.byte_span()) for info in infos)
    spans += (None,) * (len(PER_CALL) - len(spans))
    checks = () if out is None else tuple(i for i in range(_OUT) if spans[i] is not None)
    cached = _CachedPlan(plan, plan.values(out=0, lse=0),
                         Refill(slots_for(plan.attention.field_names, PER_CALL), spans, checks, (_OUT,)),
                         None if plan.combine is None else
                         Refill(slots_for(plan.combine.field_names, PER_CALL), spans, (), (_OUT,)))
    return cached, keep


def launch_descriptions(cached: _CachedPlan, sources: list, per_call: list, integers: dict) -> list:
    """The native hot path's launch descriptions of a cached plan's kernels: ``sources`` per PER_CALL entry
    (native.pointer_slots), ``per_call`` the values the templates are refilled with, ``integers`` the op argument
    of each length field refilled per call (by PER_CALL name)."""
    from . import native

    launches = []
    for bound, template, refill in zip(cached.kernels or cached.bind(), cached.templates,
                                       (cached.attention, cached.combine)):
        launches.append(native.launch_description(bound, *launch_parts(cached, refill, template, sources, per_call,
                                                                       integers)))
    return launches


def launch_parts(cached: _CachedPlan, refill: Refill, template: tuple, sources: list, per_call: list,
                 integers: dict) -> tuple:
    """One of a cached plan's kernels as native.launch_description takes it: (parameter values, pointer slots,
    integer slots, tensor maps), for ``refill`` (the attention's or the combine's) and its ``template``; the other
    arguments as launch_descriptions takes them. The fused decode step extends the attention's."""
    from . import native

    numbers = [(f, integers[PER_CALL[i]]) for f, i, _ in refill.slots if PER_CALL[i] in integers]
    maps = None
    if refill is cached.attention and cached.maps is not None:  # ws: its caches' tensor maps, fields 0 and 1
        plan = cached.plan
        maps = ((0, 1), tuple(s[1] for s in sources[1:3]), lambda pointers: list(tensor_maps(plan, *pointers)))
    return refill.values(template, per_call), native.pointer_slots(refill.slots, sources), numbers, maps


# The torch op's argument index of each of PER_CALL's entries (cukiln::decode_attention's schema); the outputs
# and the split workspace come from the native hot path's allocations.
_OP_SOURCES = {"q": 0, "k": 1, "v": 2, "kv_lens": 3, "kv_start": 6, "kv_len": 4, "kv_start_value": 7}


def describe_op(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, batch_invariant,
                result, lse, given: int | None = None):
    """The native hot path's description (runtime/native.py) of a cukiln::decode_attention call just run
    (``result``, ``lse`` its outputs, lse None where a variant's call did not ask for it; with ``given``, result is
    the caller's out, at that argument index of a variant's arguments); None where a description cannot serve the
    next call with this metadata (lengths in CPU tensors, whose values are checked on every call)."""
    from . import native

    torch = _torch or _import_torch()
    lens_int, start_int = type(kv_lens) is int, kv_start is None or type(kv_start) is int
    if any(isinstance(t, torch.Tensor) and not t.is_cuda for t in (kv_lens, kv_start)):
        return None
    cached = describe(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits,
                      None if given is None else result, lse is not None, batch_invariant)[0]
    plan = cached.plan
    out_source, lse_source, outputs, returns = native.results(result, lse, given)
    sources = {"out": out_source, "lse": lse_source}
    if cached.combine is not None:  # the split workspace, which the Python path allocates for the combine kernel
        sources.update(partial_out=(native.SCRATCH, 0), partial_lse=(native.SCRATCH, 1))
    sources.update({name: (native.ARGUMENT, _OP_SOURCES[name]) for name in ("q", "k", "v")})
    if not lens_int:
        sources["kv_lens"] = (native.ARGUMENT, _OP_SOURCES["kv_lens"])
    if not start_int:
        sources["kv_start"] = (native.ARGUMENT, _OP_SOURCES["kv_start"])
    integers = {name: _OP_SOURCES[name] for name, given_int in (("kv_len", lens_int), ("kv_start_value", start_int))
                if given_int}
    per_call_sources = [sources.get(name) for name in PER_CALL]
    launches = [] if cached.empty else launch_descriptions(cached, per_call_sources, [0] * len(PER_CALL), integers)
    scratch = ()
    if cached.combine is not None and not cached.empty:
        shape = (plan.batch, plan.heads_q, plan.num_splits)
        scratch = [(shape + (plan.head_dim,), (plan.heads_q * plan.num_splits * plan.head_dim,
                                                plan.num_splits * plan.head_dim, plan.head_dim, 1), 6),
                   (shape, (plan.heads_q * plan.num_splits, plan.num_splits, 1), 6)]
    bounds, ordered = [], []
    if lens_int:
        bounds.append((_OP_SOURCES["kv_len"], 0, cached.capacity))
    if start_int:
        bounds.append((_OP_SOURCES["kv_start_value"], 0, 2 ** 62))
        if lens_int:
            ordered.append((_OP_SOURCES["kv_start_value"], _OP_SOURCES["kv_len"]))
    return native.describe(cached.device, launches, outputs=outputs, scratch=scratch, returns=returns, bounds=bounds,
                           ordered=ordered,
                           overlaps=native.overlap_checks(cached.attention.pairs, per_call_sources),
                           bumps=() if given is None else (given,))


def _run_planned(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse,
                 batch_invariant, key, for_step=False):
    """The full path: validate and plan (caching the plan under ``key`` unless it is None), then launch."""
    torch = _torch or _import_torch()
    cached, keep = describe(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out,
                            return_lse, batch_invariant, for_step)
    plan = cached.plan
    if key is not None:
        PLANS.put(key, cached)
    result = torch.empty(q.shape, dtype=q.dtype, device=q.device) if out is None else out
    lse = torch.empty(cached.lse_shape, dtype=torch.float32, device=q.device) if return_lse else None
    f = plan.fields
    per_call = [f["q"], f["k"], f["v"], f["kv_lens"], f["kv_start"], result.data_ptr(),
                0 if lse is None else lse.data_ptr(), 0, 0, f["kv_len"], f["kv_start_value"]]
    launch_planned(cached, per_call, torch, out)
    del keep  # device copies of CPU lengths live until the launch is queued
    return (result, lse) if return_lse else result


def plan_call(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
              num_splits=None, out=None, return_lse=False, batch_invariant=False) -> DecodePlan:
    """Validate a decode_attention call and plan it without launching."""
    return _plan(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse,
                 batch_invariant)[0]


def _plan(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse,
          batch_invariant=False, for_step=False):
    """(plan, the TensorInfo of each tensor in _NAMES' order (None for an int length), tensors to keep alive)."""
    torch = _torch or _import_torch()
    lengths = []
    for name, value in (("kv_lens", kv_lens), ("kv_start", kv_start)):
        if isinstance(value, torch.Tensor):
            if value.dtype != torch.int32:
                raise TypeError(f"{name}: expected an int32 tensor, got {str(value.dtype).replace('torch.', '')}")
            if value.device.type == "cpu":  # checked, then copied to q's device for this launch
                check_host_lengths(name, value.tolist(), kv_lens, k_cache, kv_layout)
                value = value.to(q.device)
            lengths.append((value, from_torch(value, name, ("int32",))))
        else:
            lengths.append((value, None))
    if kv_lens is None:
        raise TypeError("kv_lens: expected an int or an int32 tensor [b], got None")
    qi = from_torch(q, "q", HALVES)
    ki, vi = from_torch(k_cache, "k_cache", HALVES), from_torch(v_cache, "v_cache", HALVES)
    oi = from_torch(out, "out", HALVES) if out is not None else None
    (lens, lens_info), (start, start_info) = lengths
    device = qi.device
    plan = plan_decode(qi, ki, vi, lens_info or lens, kv_layout=kv_layout, kv_start=start_info or start,
                       scale=scale, softcap=softcap, num_splits=num_splits, out=oi, return_lse=return_lse,
                       batch_invariant=batch_invariant,
                       sms=KERNELS.sm_count(device), arch=KERNELS.arch(device),
                       max_shared=KERNELS.max_shared_per_block(device),
                       resident=lambda module, symbol, shared: KERNELS.resident_blocks(
                           device, module, symbol, 32 * dispatch.DECODE_WARPS, shared),
                       active_clusters=lambda module, symbol, threads, shared, cluster: KERNELS.active_clusters(
                           device, module, symbol, threads, shared, cluster),
                       pipeline=_forced_pipeline(), for_step=for_step)
    return plan, (qi, ki, vi, lens_info, start_info, oi), (lens, start)


def _forced_pipeline() -> str | None:
    """The K/V pipeline forced by the override (cukiln.overrides; "auto": None, the dispatch table's choice)."""
    value = OVERRIDES["decode_pipeline"]
    if value == "auto":
        return None
    if value not in PIPELINES:
        raise ValueError(f"CUKILN_DECODE_PIPELINE: expected one of {PIPELINES} or auto, got {value!r}")
    return value
