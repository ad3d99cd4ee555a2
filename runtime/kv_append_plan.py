"""kv_append call planning: validate the arguments, pick a variant, fill its parameters, shape the launch.

Works on TensorInfo metadata alone (no framework, no GPU), so every rule here is tested on the CPU. Every bad
input raises ValueError or TypeError naming the argument before anything is launched or written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cukiln.core.archs import programmatic_launch
from cukiln.generated import dispatch

from .decode_plan import FP8, KV_LAYOUTS, cache_rows, cache_scales, length_argument, page_table, pool_fields
from .rope_plan import (block_shape, check_index_tensor, check_mscale, check_rotary_offset, resolve_angles,
                        widest_vector)
from .tensors import HALVES, TensorInfo, device_name


@dataclass(frozen=True)
class KvAppendPlan:
    key: tuple  # (dtype, pairing, angles, vector width)
    module: str
    symbol: str
    fmt: str
    field_names: tuple[str, ...]
    values: tuple
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    device: int
    overlap_previous: bool = False
    # (field, tensor argument, bytes added): where each tensor argument's pointer goes in the values
    pointers: tuple[tuple[str, str, int], ...] = ()
    shared: int = 0  # dynamic shared memory bytes (QK-norm: each block row's inverse RMS per head)


def _tokens_view(t: TensorInfo, name: str, expected: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(b, n, h, d) sizes and strides of a [b, n, h, d] tensor, or of a [b, h, d] one (n = 1)."""
    if t.ndim == 4:
        return t.shape, t.strides
    if t.ndim == 3:
        b, h, d = t.shape
        sb, sh, sd = t.strides
        return (b, 1, h, d), (sb, 0, sh, sd)
    raise ValueError(f"{name}: expected {expected}, got shape {list(t.shape)}")


def _lengths(value, name: str, batch: int, device: int,
             host: tuple[int, ...] | None) -> tuple[int, int, tuple | None]:
    """(pointer, int value, host values or None) of kv_lens / kv_start (decode's length argument; None: 0), the
    host values known for an int, or for a tensor given on the CPU (``host``)."""
    ptr, value, tensor = length_argument(0 if value is None else value, name, batch, device)
    return ptr, value, (host if tensor is not None else (value,) * batch)


def plan_kv_append(q: TensorInfo, k_new: TensorInfo, v_new: TensorInfo, k_cache: TensorInfo, v_cache: TensorInfo,
                   kv_lens, *, out: TensorInfo, kv_start=None, positions: TensorInfo | None = None,
                   kv_layout: str = "bhsd", freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None,
                   base=None, rope_scale=1.0, mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0,
                   inplace=False, kv_lens_out: TensorInfo | None = None, q_norm_weight: TensorInfo | None = None,
                   k_norm_weight: TensorInfo | None = None, norm_eps: float = 1e-6,
                   kv_lens_host: tuple[int, ...] | None = None, kv_start_host: tuple[int, ...] | None = None,
                   arch: str | None = None, k_scale=None, v_scale=None, block_table: TensorInfo | None = None,
                   slot_mapping: TensorInfo | None = None) -> KvAppendPlan | None:
    """The launch of one kv_append call (its arguments by their schema names, runtime/kv_append_api.py), or None
    when there is nothing to do (no row, or no new token).

    ``out`` is the tensor the rotated query goes to (q itself in place); ``kv_lens_out`` (int32 [b], optional)
    receives each row's length after the append. ``q_norm_weight`` / ``k_norm_weight`` ([d], fp32 or q's dtype):
    the QK-norm of that tensor's heads before the rotation (``norm_eps`` inside the root). ``kv_lens_host`` /
    ``kv_start_host``:
    the values of a CPU-given kv_lens / kv_start (checked in full here; the caller copies them to the device).
    FP8 (e4m3) caches (from sm_89 on): the new keys and values divided by ``k_scale`` / ``v_scale`` (decode_plan's
    cache_scales) and rounded to e4m3 with saturation.
    Paged caches: k_cache and v_cache are pools of pages, written through ``block_table`` (decode_plan.page_table: new
    token j of row i to slot kv_lens[i] + j of the row's pages) or ``slot_mapping`` (int64 [b * n] or [b, n] on q's
    device: a flat slot page x page_size + slot per new token, negative to skip it); not both.
    """
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout: expected one of {', '.join(KV_LAYOUTS)}, got {kv_layout!r}")
    if q.dtype not in HALVES:
        raise TypeError(f"q: expected float16 or bfloat16 (the caches' types), got {q.dtype}")
    sizes, q_strides = _tokens_view(q, "q", "[b, n, h_q, d] (n new tokens a row) or [b, h_q, d]")
    B, N, HQ, D = sizes
    views = {}
    for name, t in (("k_new", k_new), ("v_new", v_new)):
        if t.dtype != q.dtype or t.device != q.device:
            raise TypeError(f"{name}: expected q's dtype {q.dtype} on {device_name(q.device)}, got {t.dtype} on "
                            f"{device_name(t.device)}")
        if t.ndim != q.ndim:
            raise ValueError(f"{name}: expected a {q.ndim}-D tensor like q, got shape {list(t.shape)}")
        views[name] = _tokens_view(t, name, "")
    (_, _, HKV, _), k_strides = views["k_new"]
    if views["k_new"][0] != (B, N, HKV, D) or views["v_new"][0] != (B, N, HKV, D):
        raise ValueError(f"k_new, v_new: expected q's rows, tokens and head dim with h_kv heads, both alike; got "
                         f"{list(k_new.shape)} and {list(v_new.shape)} beside q {list(q.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype not in (q.dtype, FP8) or t.device != q.device:
            raise TypeError(f"{name}: expected q's dtype {q.dtype} or float8_e4m3fn (an FP8 cache) on "
                            f"{device_name(q.device)}, got {t.dtype} on {device_name(t.device)}")
    if k_cache.dtype != v_cache.dtype:
        raise TypeError(f"k_cache, v_cache: expected one dtype for both, got {k_cache.dtype} and {v_cache.dtype}")
    fp8 = k_cache.dtype == FP8
    if fp8 and arch is not None and int(arch.removeprefix("sm_").rstrip("a")) < _FP8_WRITES_FROM:
        raise ValueError(f"k_cache: FP8 caches are written from sm_{_FP8_WRITES_FROM} on (its conversion instruction); "
                         f"this GPU is {arch}")
    # (b, h, T, d) order, whatever the layout (a paged pool: (pages, h, page size, d)): strides (sb, sh, slot, sd)
    paged = block_table is not None or slot_mapping is not None
    (cb, ch, T, cd), (kc_sb, kc_sh, kc_ss, kc_sd) = cache_rows(k_cache, "k_cache", kv_layout, paged)
    vsizes, (vc_sb, vc_sh, vc_ss, vc_sd) = cache_rows(v_cache, "v_cache", kv_layout, paged)
    kc_strides, vc_strides = (kc_sb, kc_ss, kc_sh, kc_sd), (vc_sb, vc_ss, vc_sh, vc_sd)  # as the tokens' (b, s, h, d)
    if (ch, cd) != (HKV, D) or (cb != B and not paged) or vsizes != (cb, ch, T, cd):
        expected = (f"pools [pages, h_kv={HKV}, page_size, d={D}]" if paged else f"[b={B}, h_kv={HKV}, T, d={D}]")
        raise ValueError(f"k_cache, v_cache: expected {expected} in layout {kv_layout}, both alike; "
                         f"got {list(k_cache.shape)} and {list(v_cache.shape)}")
    paging = _paging(block_table, slot_mapping, B, N, T, cb, q.device) if paged else {}
    if paged:
        T = paging.pop("capacity")
    if inplace and not out.same_view(q):
        raise ValueError("out: inplace=True writes q itself; got a different out tensor")
    out_sizes, qo_strides = _tokens_view(out, "out", "q's shape")
    if (out.shape, out.dtype, out.device) != (q.shape, q.dtype, q.device):
        raise ValueError(f"out: expected q's shape {list(q.shape)} and dtype {q.dtype}, got {list(out.shape)} "
                         f"and {out.dtype}")
    strides = {"q": q_strides, "q_out": qo_strides, "k": k_strides, "v": views["v_new"][1], "k_cache": kc_strides,
               "v_cache": vc_strides}
    for name, st in strides.items():
        if st[3] != 1 and D > 1:
            argument = {"q_out": "out", "k": "k_new", "v": "v_new"}.get(name, name)
            raise ValueError(f"{argument}: expected a contiguous last dim (stride 1), got stride {st[3]}")
    # what is written must not meet what is read or the other writes
    in_place = out.same_view(q)
    written = (("out", out),) if not in_place else ()
    written += (("k_cache", k_cache), ("v_cache", v_cache))
    if kv_lens_out is not None:
        if kv_lens_out.dtype != "int32" or kv_lens_out.shape != (B,) or (B > 1 and kv_lens_out.strides[0] != 1):
            raise ValueError(f"kv_lens_out: expected a contiguous int32 tensor of shape [{B}], got {kv_lens_out.dtype} "
                             f"of shape {list(kv_lens_out.shape)}")
        if kv_lens_out.device != q.device:
            raise ValueError(f"kv_lens_out: expected a tensor on {device_name(q.device)}, got one on "
                             f"{device_name(kv_lens_out.device)}")
        # a separate tensor: the kernel's other readers of a row's length must not see it change
        written += (("kv_lens_out", kv_lens_out),)
    for w_name, w in written:
        for r_name, r in (("q", q), ("k_new", k_new), ("v_new", v_new), ("out", out), ("k_cache", k_cache),
                          ("v_cache", v_cache), ("positions", positions), ("kv_lens", kv_lens),
                          ("kv_start", kv_start), ("freqs", freqs), ("cos", cos), ("sin", sin),
                          ("cos_sin_cache", cos_sin_cache), ("inv_freq", inv_freq), ("kv_lens_out", kv_lens_out),
                          ("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight),
                          ("block_table", block_table), ("slot_mapping", slot_mapping)):
            if r is w or not isinstance(r, TensorInfo) or (w_name == "out" and r_name == "out"):
                continue
            if w.overlaps(r):
                raise ValueError(f"{w_name}: overlaps {r_name}" + (
                    " (use inplace=True to rotate q itself)" if r_name == "q" else ""))
        if w.has_internal_overlap():
            raise ValueError(f"{w_name}: written tensor has a broadcast (stride 0) dimension, strides "
                             f"{list(w.strides)}")
    angles = resolve_angles(q, D, freqs=freqs, cos=cos, sin=sin, cos_sin_cache=cos_sin_cache, inv_freq=inv_freq,
                            base=base, scale=rope_scale, rotary_dim=rotary_dim)
    rd = angles.rotary_dim
    check_rotary_offset(rotary_offset, D, rd)
    check_mscale(mscale)
    norm = _norm_fields(q, D, q_norm_weight, k_norm_weight, norm_eps)
    scales = cache_scales(k_scale, v_scale, FP8 if fp8 else "same", HKV, q.device)

    lens_ptr, lens_value, lens = _lengths(kv_lens, "kv_lens", B, q.device, kv_lens_host)
    start_ptr, start_value, starts = _lengths(kv_start, "kv_start", B, q.device, kv_start_host)
    if lens is not None and starts is not None:
        for i, (n_i, s_i) in enumerate(zip(lens, starts)):
            if not (0 <= n_i and n_i + N <= T and 0 <= s_i <= n_i):
                raise ValueError(f"kv_lens: row {i} holds {n_i} tokens from kv_start {s_i}; appending {N} must fit the "
                                 f"cache's {T} slots (0 <= kv_start <= kv_lens, kv_lens + n <= T"
                                 + (": a block table's columns x page_size)" if block_table is not None else ")"))
    pos_fields = {"positions": 0, "pos_stride_b": 0, "pos_stride_s": 0, "positions_int64": 0}
    if positions is not None:
        check_index_tensor(positions, "positions", q.device)
        if positions.shape == (B, N):
            pos_fields["pos_stride_b"], pos_fields["pos_stride_s"] = positions.strides
        elif N == 1 and positions.shape == (B,):
            pos_fields["pos_stride_b"] = positions.strides[0]
        else:
            raise ValueError(f"positions: expected shape [{B}, {N}] (rows x new tokens)" +
                             (f" or [{B}]" if N == 1 else "") + f", got {list(positions.shape)}")
        pos_fields["positions"], pos_fields["positions_int64"] = positions.ptr, int(positions.dtype == "int64")
    elif angles.table_rows is not None and lens is not None and starts is not None and B and N:
        top = max(n_i - s_i for n_i, s_i in zip(lens, starts)) + N - 1
        if top >= angles.table_rows:
            raise ValueError(f"kv_lens: positions up to {top} (slot - kv_start) fall outside the angle table of "
                             f"{angles.table_rows} rows")
    if B * N == 0:
        return None

    itemsize = q.itemsize
    span, cache_span = rotary_offset * itemsize, rotary_offset * k_cache.itemsize
    pointers = (q.ptr + span, out.ptr + span, k_new.ptr + span, k_cache.ptr + cache_span, v_new.ptr, v_cache.ptr)
    row_strides = tuple(s for st in strides.values() for s in st[:3])
    vec = widest_vector(itemsize, rd, D, interleaved, True, 3, pointers, row_strides, 16, rotary_offset)
    key = (q.dtype, "interleaved" if interleaved else "half", angles.kind, vec, norm is not None)
    entry = dispatch.KV_APPEND.get(key)
    if entry is None:
        raise AssertionError(f"no kv_append variant for {key}: the variant space and the planner disagree")
    module, symbol, layout_id = entry
    names, fmt = dispatch.KV_APPEND_PARAMS[layout_id]
    block = block_shape(rd // 2 // vec, HQ + HKV, B * N, False, dispatch.KV_APPEND_MAX_THREADS, 64)
    shared = 0
    if norm is not None:  # each block row's inverse RMS per head, in the default 48 KB of shared memory
        rows = block[2]
        while rows > 1 and rows * (HQ + HKV) * 4 > _SHARED_LIMIT:
            rows //= 2
        block, shared = (block[0], block[1], rows), rows * (HQ + HKV) * 4
        if shared > _SHARED_LIMIT:
            raise ValueError(f"q_norm_weight: QK-norm serves up to {_SHARED_LIMIT // 4} heads of q and k together, "
                             f"got {HQ + HKV}")
    grid = (-(-(B * N) // block[2]), 1, 1)
    fields = {"q": pointers[0], "q_out": pointers[1], "k": pointers[2], "k_cache": pointers[3], "v": pointers[4],
              "v_cache": pointers[5], "batch": B, "new_tokens": N, "heads_q": HQ, "heads_kv": HKV, "head_dim": D,
              "rotary_dim": rd, "rotary_offset": rotary_offset, "capacity": T, "copy_tail": int(rd < D),
              "mscale": float(mscale), "kv_lens": lens_ptr, "kv_len_value": lens_value,
              "kv_lens_out": 0 if kv_lens_out is None else kv_lens_out.ptr, "kv_start": start_ptr,
              "kv_start_value": start_value, **pos_fields, **angles.any_source_fields(), **(norm or {}), "cache_fp8": int(fp8),
              **scales, **{"slot_mapping": 0, **pool_fields(1, 0)}, **paging}
    for name, (sb, ss, sh, _) in strides.items():
        fields[f"{name}_sb"], fields[f"{name}_ss"], fields[f"{name}_sh"] = sb, ss, sh
    refills = [("q", "q", span), ("q_out", "out", span), ("k", "k_new", span), ("k_cache", "k_cache", cache_span),
               ("v", "v_new", 0), ("v_cache", "v_cache", 0)]
    refills += [(f, f, 0) for f in ("kv_lens", "kv_start", "positions", "kv_lens_out", "q_norm_weight",
                                    "k_norm_weight", "k_scale", "v_scale", "block_table", "slot_mapping")
                 if fields.get(f)]
    refills += list(angles.pointers)
    return KvAppendPlan(key, module, symbol, fmt, names, tuple(fields[n] for n in names), grid, block, q.device,
                        programmatic_launch(arch), tuple(r for r in refills if r[0] in names), shared)


# A flat slot mapping's rows have no capacity: the append's fit check (kv_lens + n <= capacity) passes for any length.
_UNBOUNDED = 2**62


def _paging(block_table, slot_mapping, B: int, N: int, page_size: int, num_pages: int, device: int) -> dict:
    """The paged fields of an append, and its rows' capacity ("capacity"): a block table's columns x page size, or
    unbounded with a slot mapping (int64 [b * n] or [b, n], contiguous, on q's device; checked, ValueError/TypeError
    naming it)."""
    if block_table is not None and slot_mapping is not None:
        raise ValueError("slot_mapping: give a block_table or a slot_mapping, not both")
    if block_table is not None:
        capacity, fields = page_table(block_table, B, page_size, num_pages, device, ())
        return {**fields, "capacity": capacity}
    if not isinstance(slot_mapping, TensorInfo):
        raise TypeError(f"slot_mapping: expected an int64 tensor or None, got {type(slot_mapping).__name__}")
    if slot_mapping.dtype != "int64":
        raise TypeError(f"slot_mapping: expected an int64 tensor (flat slots, as vLLM's), got dtype {slot_mapping.dtype}")
    contiguous = slot_mapping.strides[-1:] in ((1,), ()) and (slot_mapping.ndim < 2 or B == 1
                                                               or slot_mapping.strides[0] == N)
    if slot_mapping.shape not in ((B * N,), (B, N)) or not (contiguous or B * N <= 1):
        raise ValueError(f"slot_mapping: expected a contiguous [{B * N}] (or [{B}, {N}]) tensor, a slot per new token, "
                         f"got shape {list(slot_mapping.shape)} strides {list(slot_mapping.strides)}")
    if slot_mapping.device != device:
        raise ValueError(f"slot_mapping: expected a tensor on {device_name(device)} (q's device), got one on "
                         f"{device_name(slot_mapping.device)}")
    return {**pool_fields(page_size, num_pages), "slot_mapping": slot_mapping.ptr, "capacity": _UNBOUNDED}


_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a launch gets without opting in
_FP8_WRITES_FROM = 89  # cvt.rn.satfinite.e4m3x2.f32



def _norm_fields(q: TensorInfo, D: int, q_weight: TensorInfo | None, k_weight: TensorInfo | None,
                 eps) -> dict | None:
    """The QK-norm kernel fields of these weights (None: no QK-norm), each checked: [d], contiguous, fp32 or q's
    dtype (both alike), on q's device; eps a finite number >= 0."""
    if q_weight is None and k_weight is None:
        return None
    given = [(n, w) for n, w in (("q_norm_weight", q_weight), ("k_norm_weight", k_weight)) if w is not None]
    for name, w in given:
        if w.dtype not in ("fp32", q.dtype):
            raise TypeError(f"{name}: expected float32 or q's dtype {q.dtype}, got {w.dtype}")
        if w.device != q.device:
            raise ValueError(f"{name}: expected a tensor on {device_name(q.device)}, got one on {device_name(w.device)}")
        if w.shape != (D,) or (D > 1 and w.strides[0] != 1):
            raise ValueError(f"{name}: expected a contiguous [{D}] tensor (one weight a feature), got shape "
                             f"{list(w.shape)} strides {list(w.strides)}")
    if len({w.dtype for _, w in given}) > 1:
        raise TypeError(f"q_norm_weight, k_norm_weight: expected one dtype for both, got {q_weight.dtype} and "
                        f"{k_weight.dtype}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"norm_eps: expected a finite number >= 0, got {eps!r}")
    return {"q_norm_weight": 0 if q_weight is None else q_weight.ptr,
            "k_norm_weight": 0 if k_weight is None else k_weight.ptr,
            "norm_weight_fp32": int(given[0][1].dtype == "fp32"), "norm_eps": float(eps)}
