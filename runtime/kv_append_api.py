"""cukiln.kv_append: a decode (or chunked-prefill) step's new tokens rotated and appended to fixed-capacity KV caches in
one launch; and its float64 reference.

The per-call path is the one every op shares (plan_cache.py): a call whose metadata was seen before takes its
validated plan, refills the pointers, rechecks the overlaps of what it writes and launches.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from .interop import call_with_foreign_arrays, is_plain_torch_call
from .kv_append_plan import KvAppendPlan, plan_kv_append
from .launch import kernel
from .loader import KERNELS
from .plan_cache import PlanCache, Refill, add_tensors
from .tensors import FLOATS, HALVES, INTS, TensorInfo, from_torch, refuse_untracked_gradients

# Tensor arguments in a fixed order (the call's pointers are listed so) and the dtypes each one takes.
TENSOR_ARGS = ("q", "q_out", "k_new", "v_new", "k_cache", "v_cache", "kv_lens", "kv_start", "positions", "freqs",
                "cos", "sin", "cos_sin_cache", "inv_freq", "kv_lens_out", "q_norm_weight", "k_norm_weight")
_ACCEPTS = ((HALVES,) * 6 + (("int32",), ("int32",), INTS, ("fp32",), FLOATS, FLOATS, FLOATS, ("fp32",), ("int32",))
            + (FLOATS,) * 2)
_INDEX = {name: i for i, name in enumerate(TENSOR_ARGS)}
_WRITTEN = (1, 4, 5, 14)  # q_out, k_cache, v_cache, kv_lens_out


@dataclass
class _CachedPlan:
    plan: KvAppendPlan | None
    refill: Refill
    kernel: object = None

    def bind(self):
        p = self.plan
        self.kernel = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, p.shared, p.overlap_previous)
        return self.kernel


PLANS = PlanCache()
_torch = None
# The call through the native hot path (torch_support.public_call), or False where it is off; None until first needed
_NATIVE = None


def _native():
    global _NATIVE
    from .torch_support import public_call

    _NATIVE = public_call("kv_append")
    return _NATIVE


def kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, positions=None,
              kv_lens_out=None, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0,
              mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0, q_norm_weight=None, k_norm_weight=None,
              norm_eps=1e-6, inplace=False, out=None, stream=None):
    """Rotate each row's new query and key tokens by RoPE and append the rotated keys and the values to the caches at
    the row's current length, in one launch. Returns the rotated query.

    q: [b, n, h_q, d] (n new tokens a row: 1 for decode, more for chunked prefill or speculative drafts) or
    [b, h_q, d] (n = 1), fp16 or bf16; k_new, v_new: [b, n, h_kv, d] (or [b, h_kv, d]) of q's dtype. Every tensor's
    last dim is contiguous; its other strides are free (q, k and v may be slices of one fused projection).
    k_cache, v_cache: [b, h_kv, T, d] (kv_layout "bhsd") or [b, T, h_kv, d] ("bshd"), any strides (slices of larger
    buffers): new token j of row i goes to slot kv_lens[i] + j of both.
    kv_lens: each row's length before the append, an int or an int32 [b] tensor (on q's device; a CPU tensor is
    checked and copied over). kv_start (int or int32 [b], default 0): the row's first valid slot (left padding).
    The RoPE position of a new token is its slot minus kv_start, or ``positions`` ([b, n], or [b] for n = 1,
    int32/int64) when given. Angles: exactly one of cukiln.rope's sources (freqs, cos/sin, cos_sin_cache,
    inv_freq, base; ``scale``, ``mscale``, ``interleaved``, ``rotary_dim``, ``rotary_offset`` as there); the
    features outside the rotated span pass through to q's output and to the key cache.
    QK-norm (Qwen3, Gemma 3): ``q_norm_weight`` / ``k_norm_weight`` ([d], fp32 or q's dtype, contiguous) normalize
    each head of q / k before the rotation, x * rsqrt(mean(x^2 over the head's d features) + norm_eps) * weight, in
    fp32 (Gemma's (1 + weight) is passed as such); either may be given alone.
    Lengths on the device are never read back: a row whose new slots would run past the capacity (or with a
    negative length, or a kv_start beyond its length) writes nothing to the caches and gets NaN rotated features
    in its query output, as decode_attention reports bad lengths with NaN. Host-known lengths are checked, and a
    bad one raises before anything is written. ``kv_lens_out`` (an int32 [b] tensor of its own, optional) receives
    each row's length after the append, kv_lens + n: what decode_attention reads next.
    inplace=True rotates q itself; otherwise the query goes to ``out`` (allocated like q when None). k_new is never
    written. Runs on the current torch stream without synchronizing (``stream=`` picks another); CUDA-graph
    capturable with device lengths. Not differentiable.
    """
    if not is_plain_torch_call(q, stream):
        return call_with_foreign_arrays(kv_append, locals())
    if (q.requires_grad or getattr(k_new, "requires_grad", False) or getattr(v_new, "requires_grad", False)
            or getattr(out, "requires_grad", False)):
        refuse_untracked_gradients("cukiln.kv_append", (("q", q), ("k_new", k_new), ("v_new", v_new), ("out", out)))
    # The native hot path, where it loads (lengths in tensors, or ints: refilled per call, checked within bounds)
    if (q.is_cuda and (type(kv_lens) is int or type(kv_lens) is type(q))
            and (out is None or (type(out) is type(q) and not inplace))
            and (kv_lens_out is None or type(kv_lens_out) is type(q))):
        native = _NATIVE if _NATIVE is not None else _native()
        if native:
            return native(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, kv_lens_out,
                          freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, interleaved, rotary_dim,
                          rotary_offset, q_norm_weight, k_norm_weight, norm_eps, inplace, out)
    return run_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, kv_lens_out,
                         freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, interleaved, rotary_dim,
                         rotary_offset, q_norm_weight, k_norm_weight, norm_eps, inplace, out)


# kv_append's keyword arguments and defaults, but inplace, out and stream (plan_call's)
_DEFAULTS = {n: p.default for n, p in inspect.signature(kv_append).parameters.items() if n not in
             ("q", "k_new", "v_new", "k_cache", "v_cache", "kv_lens", "inplace", "out", "stream")}


def run_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, kv_lens_out, freqs, cos,
                  sin, cos_sin_cache, inv_freq, base, scale, mscale, interleaved, rotary_dim, rotary_offset,
                  q_norm_weight, k_norm_weight, norm_eps, inplace, out):
    """kv_append() on torch tensors, every argument positional (its signature's order, less stream)."""
    global _torch
    torch = _torch
    if torch is None:
        import torch

        _torch = torch
    if inplace:
        if out is not None and out is not q:
            raise ValueError("out: inplace=True writes q itself; got a different out tensor")
        out, fresh = q, False
    elif out is None:
        out, fresh = torch.empty_like(q), True
    else:
        fresh = False
    copied = []
    lens_host = start_host = None
    if isinstance(kv_lens, torch.Tensor) and kv_lens.device.type == "cpu":
        lens_host, kv_lens = _host_lengths(kv_lens, "kv_lens", q, copied, torch)
    if isinstance(kv_start, torch.Tensor) and kv_start.device.type == "cpu":
        start_host, kv_start = _host_lengths(kv_start, "kv_start", q, copied, torch)
    args = (q, out, k_new, v_new, k_cache, v_cache, kv_lens, kv_start, positions, freqs, cos, sin, cos_sin_cache,
            inv_freq, kv_lens_out, q_norm_weight, k_norm_weight)
    try:
        key = [kv_layout, base, scale, mscale, interleaved, rotary_dim, rotary_offset, norm_eps, inplace, fresh,
               lens_host, start_host]
        pointers = []
        add_tensors(key, pointers, args)
        key = tuple(key)
        cached = PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, unhashable scalars: the full validation explains
        key, cached = None, None
    if cached is None:
        cached = describe(args, kv_layout=kv_layout, base=base, scale=scale, mscale=mscale, interleaved=interleaved,
                          rotary_dim=rotary_dim, rotary_offset=rotary_offset, norm_eps=norm_eps, inplace=inplace,
                          fresh=fresh, kv_lens_host=lens_host, kv_start_host=start_host)
        if key is not None:
            PLANS.put(key, cached)
        pointers = [0 if t is None or type(t) is int else t.data_ptr() for t in args]
    p = cached.plan
    if p is not None:
        overlap = cached.refill.overlapping(pointers) if cached.refill.checks else None
        if overlap is not None:
            raise ValueError(f"{TENSOR_ARGS[overlap[0]]}: overlaps {TENSOR_ARGS[overlap[1]]}")
        values = cached.refill.values(p.values, pointers)
        (cached.kernel or cached.bind())(values, torch._C._cuda_getCurrentRawStream(p.device))
        written = (k_cache, v_cache) if fresh else (out, k_cache, v_cache)
        torch._C._increment_version(written if kv_lens_out is None else written + (kv_lens_out,))
    del copied  # host lengths copied to the device live until their kernel is queued
    return out


# cukiln::kv_append's argument index of each tensor of TENSOR_ARGS it takes (its q_out is the op's fresh output)
OP_POSITIONS = {"q": 0, "k_new": 1, "v_new": 2, "k_cache": 3, "v_cache": 4, "kv_lens": 5, "kv_start": 8,
                "positions": 10, "freqs": 11, "cos": 12, "sin": 13, "cos_sin_cache": 14, "inv_freq": 15,
                "q_norm_weight": 22, "k_norm_weight": 23}


def sources_of(args, positions: dict, replaced: dict) -> list:
    """Per TENSOR_ARGS pointer, where the native hot path finds it (native.pointer_slots): the op argument at
    ``positions`` for a tensor given, ``replaced[name]`` for a tensor the op allocates, None otherwise."""
    from . import native

    return [replaced[name] if name in replaced else
            None if t is None or type(t) is int else (native.ARGUMENT, positions[name])
            for name, t in zip(TENSOR_ARGS, args)]


def describe_op(args, *, inplace: bool = False, out_at: int | None = None, lens_out_at: int | None = None,
                **planning) -> dict | None:
    """The native hot path's description (runtime/native.py) of a cukiln::kv_append call just run on ``args``
    (TENSOR_ARGS' order), planned again with ``planning`` (describe()'s keywords); None with lengths in CPU tensors
    (their values are checked per call). q_out is the op's fresh output, or (a variant's, for the public calls) q
    itself with ``inplace``, or the caller's out at argument ``out_at``; ``lens_out_at``: the argument holding
    kv_lens_out. Int lengths are refilled per call (the op's kv_len and kv_start), within the bounds the Python
    path checks (a call outside them goes back to it, which raises)."""
    from . import native

    if any(getattr(args[_INDEX[n]], "is_cuda", True) is False for n in ("kv_lens", "kv_start")):
        return None
    fresh = not inplace and out_at is None
    cached = describe(args, inplace=inplace, fresh=fresh, kv_lens_host=None, kv_start_host=None, **planning)
    q_out_at = None if fresh else OP_POSITIONS["q"] if inplace else out_at
    replaced = {"q_out": (native.OUTPUT, 0) if fresh else (native.ARGUMENT, q_out_at)}
    if lens_out_at is not None:
        replaced["kv_lens_out"] = (native.ARGUMENT, lens_out_at)
    sources = sources_of(args, OP_POSITIONS, replaced)
    p = cached.plan
    integers, bounds, ordered = _int_lengths(args, p)
    launches = [] if p is None else [native.launch_description(
        cached.kernel or cached.bind(), cached.refill.values(p.values, [0] * len(TENSOR_ARGS)),
        native.pointer_slots(cached.refill.slots, sources), integers)]
    written = tuple(i for i in (OP_POSITIONS["k_cache"], OP_POSITIONS["v_cache"], q_out_at, lens_out_at)
                    if i is not None)
    return native.describe(args[0].get_device(), launches, outputs=[native.allocation(args[1])] if fresh else [],
                           returns=(0,) if fresh else (-1 - q_out_at,), bounds=bounds, ordered=ordered,
                           overlaps=native.overlap_checks(cached.refill.pairs, sources), bumps=written)


# cukiln::kv_append's argument index of each int length field (its kv_len and kv_start), refilled per call
OP_INT_LENGTHS = {"kv_len_value": 6, "kv_start_value": 9}


def _int_lengths(args, p: KvAppendPlan | None) -> tuple[list, list, list]:
    """A description's int-length refills for a call on ``args`` planned as ``p``: (integer slots, bounds, ordered
    pairs). Where both lengths are ints the Python path checks 0 <= kv_start <= kv_len and kv_len + n <= T, and
    without positions that every position (slot - kv_start) lies in the angle table: bounded here by
    kv_len + n <= its rows, which holds whenever those checks pass with kv_start = 0 (a call past it with a larger
    kv_start goes back to the Python path, which serves it)."""
    if p is None:
        return [], [], []
    lens, start = args[_INDEX["kv_lens"]], args[_INDEX["kv_start"]]
    lens_int, start_int = type(lens) is int, start is None or type(start) is int
    field = {name: i for i, name in enumerate(p.field_names)}
    integers = [(field[f], OP_INT_LENGTHS[f]) for f, given in (("kv_len_value", lens_int),
                                                               ("kv_start_value", start_int)) if given]
    if not (lens_int and start_int):
        return integers, [], []  # a length on the device: the kernel reports a bad row with NaN, as it does there
    values = dict(zip(p.field_names, p.values))
    top = values["capacity"] - values["new_tokens"]
    table = next((t for t in (args[_INDEX[n]] for n in ("freqs", "cos", "sin", "cos_sin_cache")) if t is not None),
                 None)
    if args[_INDEX["positions"]] is None and table is not None:
        top = min(top, table.shape[0] - values["new_tokens"])
    return (integers, [(OP_INT_LENGTHS["kv_len_value"], 0, top), (OP_INT_LENGTHS["kv_start_value"], 0, 2 ** 62)],
            [(OP_INT_LENGTHS["kv_start_value"], OP_INT_LENGTHS["kv_len_value"])])


def _host_lengths(t, name: str, q, copied: list, torch) -> tuple[tuple[int, ...], object]:
    if t.dtype != torch.int32:
        raise TypeError(f"{name}: expected int32, got {str(t.dtype).replace('torch.', '')}")
    host = tuple(t.tolist())
    device_copy = t.to(q.device)
    copied.append(device_copy)
    return host, device_copy


def describe(args, *, kv_layout, base, scale, mscale, interleaved, rotary_dim, rotary_offset, norm_eps, inplace,
             fresh, kv_lens_host, kv_start_host, fresh_lens_out=False) -> _CachedPlan:
    """Validate and plan a call on ``args`` (TENSOR_ARGS' order): its cached plan. ``fresh``: q_out is allocated
    for the call (no overlap to recheck); ``fresh_lens_out``: so is kv_lens_out (decode_step's workspace)."""
    # an int kv_lens / kv_start is a value, not a tensor (a bool is refused by from_torch, naming it)
    infos = [None if t is None or (name in ("kv_lens", "kv_start") and type(t) is int) else from_torch(t, name, accepts)
             for name, t, accepts in zip(TENSOR_ARGS, args, _ACCEPTS)]
    tables = dict(zip(TENSOR_ARGS, infos))
    lens = args[_INDEX["kv_lens"]] if isinstance(args[_INDEX["kv_lens"]], int) else tables["kv_lens"]
    start = args[_INDEX["kv_start"]] if isinstance(args[_INDEX["kv_start"]], int) else tables["kv_start"]
    q = tables["q"]
    plan = plan_kv_append(q, tables["q_out"], tables["k_new"], tables["v_new"], tables["k_cache"], tables["v_cache"],
                          kv_lens=lens, kv_start=start, positions=tables["positions"], kv_layout=kv_layout,
                          freqs=tables["freqs"], cos=tables["cos"], sin=tables["sin"],
                          cos_sin_cache=tables["cos_sin_cache"], inv_freq=tables["inv_freq"], base=base, scale=scale,
                          mscale=mscale, interleaved=interleaved, rotary_dim=rotary_dim, rotary_offset=rotary_offset,
                          inplace=inplace, kv_lens_out=tables["kv_lens_out"], q_norm_weight=tables["q_norm_weight"],
                          k_norm_weight=tables["k_norm_weight"], norm_eps=norm_eps, kv_lens_host=kv_lens_host,
                          kv_start_host=kv_start_host,
                          arch=KERNELS.arch(q.device))
    spans = tuple(None if not isinstance(info, TensorInfo) else tuple(b - info.ptr for b in info.byte_span())
                  for info in infos)
    unchecked = ((1,) if fresh or inplace else ()) + ((_INDEX["kv_lens_out"],) if fresh_lens_out else ())
    written = tuple(i for i in _WRITTEN if spans[i] is not None and i not in unchecked)
    checks = tuple(i for i, span in enumerate(spans) if span is not None and i not in unchecked)
    if plan is None:
        return _CachedPlan(None, Refill((), spans, checks, written))
    slots = tuple((plan.field_names.index(field), _INDEX[arg], add) for field, arg, add in plan.pointers)
    return _CachedPlan(plan, Refill(slots, spans, checks, written))


def plan_call(q, k_new, v_new, k_cache, v_cache, kv_lens, **kwargs) -> KvAppendPlan | None:
    """Validate a kv_append() call and plan its launch without launching (for checks and measurements)."""
    torch = _torch or __import__("torch")
    inplace, out = kwargs.pop("inplace", False), kwargs.pop("out", None)
    out = q if inplace else (torch.empty_like(q) if out is None else out)
    unknown = set(kwargs) - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"plan_call: unexpected arguments {sorted(unknown)}")
    a = {**_DEFAULTS, **kwargs}
    args = (q, out, k_new, v_new, k_cache, v_cache, kv_lens, a["kv_start"], a["positions"], a["freqs"], a["cos"],
            a["sin"], a["cos_sin_cache"], a["inv_freq"], a["kv_lens_out"], a["q_norm_weight"], a["k_norm_weight"])
    return describe(args, kv_layout=a["kv_layout"], base=a["base"], scale=a["scale"], mscale=a["mscale"],
                              interleaved=a["interleaved"], rotary_dim=a["rotary_dim"],
                              rotary_offset=a["rotary_offset"], norm_eps=a["norm_eps"], inplace=inplace, fresh=False,
                              kv_lens_host=None, kv_start_host=None).plan


def reference_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None,
                        positions=None, kv_lens_out=None, freqs=None, cos=None, sin=None, cos_sin_cache=None,
                        inv_freq=None, base=None, scale=1.0, mscale=1.0, interleaved=False, rotary_dim=None,
                        rotary_offset=0, q_norm_weight=None, k_norm_weight=None, norm_eps=1e-6, inplace=False,
                        out=None):
    """float64 kv_append: the rotated query (new, or written to q / out) and the caches written in place, each new
    key normalized (QK-norm, when its weight is given) and rotated by the float64 RoPE reference at its position;
    rows that do not fit write nothing and get NaN queries, as the kernels do. Lengths are read on the host."""
    import torch

    from . import reference

    three = q.ndim == 3
    q4, k4, v4 = (t[:, None] if three else t for t in (q, k_new, v_new))
    b, n = q4.shape[:2]
    T = k_cache.shape[2] if kv_layout == "bhsd" else k_cache.shape[1]
    lens = torch.as_tensor(kv_lens).to(torch.int64).cpu().expand(b)
    start = torch.as_tensor(0 if kv_start is None else kv_start).to(torch.int64).cpu().expand(b)
    slots = lens[:, None] + torch.arange(n)
    pos = (slots - start[:, None]) if positions is None else positions.to(torch.int64).cpu().reshape(b, n)
    valid = (lens >= 0) & (lens + n <= T) & (start >= 0) & (start <= lens)
    angles = dict(freqs=freqs, cos=cos, sin=sin, cos_sin_cache=cos_sin_cache, inv_freq=inv_freq, base=base,
                  scale=scale, mscale=mscale, interleaved=interleaved, rotary_dim=rotary_dim,
                  rotary_offset=rotary_offset)
    rd = reference.rotary_dim_of(q4[:1, :1, :1].detach(), **angles)
    if q_norm_weight is not None or k_norm_weight is not None:
        # normalized heads are float64: the reference then takes float64 tables too (their values unchanged)
        q4, k4 = (x if w is None else reference.rms_norm(x, w, norm_eps) for x, w in ((q4, q_norm_weight),
                                                                                      (k4, k_norm_weight)))
        angles = {n: t.double() if hasattr(t, "is_floating_point") and t.is_floating_point() else t
                  for n, t in angles.items()}
    # each row's new tokens as a [n, 1, h, d] sbhd tensor, at that row's positions
    # (the reference takes the tensors in their own dtypes, which its checks of the tables' dtypes read)
    q_rot = torch.stack([reference.rope(q4[i].detach()[:, None], positions=pos[i].to(q.device), **angles)[:, 0]
                         for i in range(b)]) if b else q4.double()
    k_rot = torch.stack([reference.rope(k4[i].detach()[:, None], positions=pos[i].to(q.device), **angles)[:, 0]
                         for i in range(b)]) if b else k4.double()
    rotated = (rotary_offset, rotary_offset + rd)
    for i in range(b):
        if not valid[i]:
            q_rot[i, ..., rotated[0]:rotated[1]] = float("nan")
            continue
        for j in range(n):
            s = int(slots[i, j])
            if kv_layout == "bhsd":
                k_cache[i, :, s] = k_rot[i, j].to(k_cache.dtype)
                v_cache[i, :, s] = v4[i, j]
            else:
                k_cache[i, s] = k_rot[i, j].to(k_cache.dtype)
                v_cache[i, s] = v4[i, j]
    if kv_lens_out is not None:
        kv_lens_out.copy_(lens + n)
    result = q_rot[:, 0] if three else q_rot
    target = q if inplace else out
    if target is None:
        return result
    target.copy_(result)
    return target
