"""float64 reference implementations, written for clarity: the tests' ground truth.

Same API as the kernels, on any device (plain PyTorch: CPU or GPU): ``cukiln.reference.<op>`` has the op's public
signature (built from its schema, runtime/binder.py, less ``stream``) and runs the body ``_<op>`` here on the
arguments. Every call is validated as the kernels validate it (the planners' own checks, so a call one refuses the
other refuses too), then computed in float64. The result is a new float64 tensor of x's shape, or, with
``inplace=True`` / ``out=``, x or out written (in their dtype) and returned, as the kernels do. Wider dtypes than
the kernels' are taken too (float64 for any floating tensor, int64 for lengths), validated as the kernel dtype they
stand for.
"""

from __future__ import annotations

import importlib
import types

_BUILT: dict = {}


def __getattr__(name: str):
    """The reference of op ``name`` (the generated families table lists them): built once from its schema."""
    from cukiln.generated.families import API, REFERENCE

    if name not in REFERENCE:
        raise AttributeError(f"module 'cukiln.reference' has no attribute {name!r}")
    if name not in _BUILT:
        from .binder import build, reference_source
        from .calls import RUNTIMES, namespace_of

        importlib.import_module(f"cukiln.{API[name]}")
        runtime = RUNTIMES[name]
        body = globals()[f"_{name}"]
        namespace = dict(namespace_of(runtime), _BODY=body, _Arguments=types.SimpleNamespace)
        function = build(reference_source(runtime.schema, (body.__doc__ or "").strip()), name, namespace)
        function.__module__ = __name__
        _BUILT[name] = function
    return _BUILT[name]


def __dir__() -> list[str]:
    from cukiln.generated.families import REFERENCE

    return sorted(set(globals()) | set(REFERENCE))


def _pair_index(rotary_dim: int, interleaved: bool, device):
    """The pair each rotary feature belongs to: i for (i, i + rd/2), or i for (2i, 2i + 1)."""
    import torch

    e = torch.arange(rotary_dim, device=device)
    return e // 2 if interleaved else e % (rotary_dim // 2)


def _rotate(v, interleaved: bool):
    """rot(v): the partner of each feature, negated for the first of a pair."""
    import torch

    if interleaved:
        return torch.stack((-v[..., 1::2], v[..., 0::2]), dim=-1).flatten(-2)
    h = v.shape[-1] // 2
    return torch.cat((-v[..., h:], v[..., :h]), dim=-1)


def cp_global_index(k, n: int, cp_size: int, cp_rank: int):
    """Global sequence index of local index k (a tensor) in a local sequence of n tokens.

    TransformerEngine's load-balanced context parallel: the global sequence is cut into 2 * cp_size
    chunks of n / 2 tokens; rank r holds chunks r and 2 * cp_size - 1 - r, in that order.
    """
    if cp_size == 1:
        return k
    half = n // 2
    import torch

    return torch.where(k < half, k + cp_rank * half, n * cp_size - (cp_rank + 1) * half + (k - half))


def _token_positions(S: int, B: int, positions, offsets, device, cp_size: int = 1, cp_rank: int = 0):
    """int64 positions [S, B]."""
    import torch

    if positions is not None:
        p = positions.to(device=device, dtype=torch.int64)
        return p[:, None].expand(S, B) if p.ndim == 1 else p.transpose(0, 1)
    off = torch.as_tensor(0 if offsets is None else offsets, device=device).to(torch.int64)
    seq = cp_global_index(torch.arange(S, device=device, dtype=torch.int64), S, cp_size, cp_rank)[:, None]
    return (seq + (off[None, :] if off.ndim == 1 else off)).expand(S, B)


def packed_positions(cu_seqlens, tokens: int, offsets=None, cp_size: int = 1, cp_rank: int = 0):
    """(positions [tokens] int64, covered [tokens] bool) of a thd tensor: token j of local sequence i
    (tokens [cu[i] / cp_size, cu[i+1] / cp_size)) has position cp_global_index(j - start) + offsets[i]."""
    import torch

    cu = [int(v) for v in cu_seqlens.tolist()]
    off = torch.as_tensor(0 if offsets is None else offsets).to(torch.int64).cpu()
    pos = torch.zeros(tokens, dtype=torch.int64)
    covered = torch.zeros(tokens, dtype=torch.bool)
    for i in range(len(cu) - 1):
        start, end = cu[i] // cp_size, min(cu[i + 1] // cp_size, tokens)
        if end <= start:
            continue
        k = torch.arange(end - start, dtype=torch.int64)
        n = cu[i + 1] // cp_size - start
        pos[start:end] = cp_global_index(k, n, cp_size, cp_rank) + (off[i] if off.ndim == 1 else off)
        covered[start:end] = True
    return pos, covered


def _lookup(table, pos, cols):
    """table[pos, cols] for a [rows, width] table, per feature (pos [..., rd], cols [rd]); NaN for a position
    outside the table."""
    import torch

    rows = table.shape[0]
    valid = (pos >= 0) & (pos < rows)
    got = table[pos.clamp(0, rows - 1), cols]
    return torch.where(valid, got, torch.full_like(got, float("nan")))


def mrope_pair_sections(mrope_section, pairs: int, interleaved: bool, device):
    """The position row (0 time, 1 height, 2 width) each of the rotary pairs takes under M-RoPE: chunked
    sections, or Qwen3-VL's interleaved ones."""
    import torch

    t, h, w = mrope_section
    i = torch.arange(pairs, device=device)
    if interleaved:
        return torch.where((i % 3 == 1) & (i < 3 * h), 1, torch.where((i % 3 == 2) & (i < 3 * w), 2, 0))
    return torch.where(i < t, 0, torch.where(i < t + h, 1, 2))


def rotary_dim_of(x, *, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, rope_scale=1.0,
                  mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0):
    """The rotary dim a rope call on ``x`` with these angle arguments rotates (the planner's reading of the tables'
    widths)."""
    from .calls import standing_for
    from .rope_plan import resolve_angles
    from .tensors import FLOATS

    def info(t, name, accepts):
        return None if t is None else standing_for(t, name, accepts)

    return resolve_angles(info(x, "x", FLOATS), x.shape[-1], freqs=info(freqs, "freqs", ("fp32",)),
                          cos=info(cos, "cos", FLOATS), sin=info(sin, "sin", FLOATS),
                          cos_sin_cache=info(cos_sin_cache, "cos_sin_cache", FLOATS),
                          inv_freq=info(inv_freq, "inv_freq", ("fp32",)), base=base, scale=rope_scale,
                          rotary_dim=rotary_dim).rotary_dim


def rms_norm(x, weight, eps: float):
    """float64 RMSNorm over the last dim (a head's features, as kv_append's QK-norm normalizes q and k):
    x * rsqrt(mean(x^2) + eps) * weight."""
    import torch

    x = x.detach().to(torch.float64)
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * weight.detach().to(torch.float64)


def _written(result, x, inplace: bool, out):
    """The float64 result as the call asked for it: new, or written into x (in place) or out."""
    target = x if inplace else out
    if target is None:
        return result
    target.copy_(result)
    return target


def _rope(a):
    """float64 RoPE: y = x*cos + rot(x)*sin forward, g = x*cos - rot(x*sin) backward (see cukiln.rope), on
    features [rotary_offset, rotary_offset + rotary_dim). thd tokens outside every sequence come back unchanged."""
    return _rotated(a.x, a, _rotary_dim(a.x, a), a.out)


def _rope_qk(a):
    """float64 rope_qk: (rope of q, rope of k with q's angles and positions) as cukiln.rope_qk."""
    q_out, k_out = (None, None) if a.out is None else a.out
    rd = _rotary_dim(a.q, a)
    return _rotated(a.q, a, rd, q_out), None if a.k is None else _rotated(a.k, a, rd, k_out)


def _rotary_dim(x, a) -> int:
    return rotary_dim_of(x, freqs=a.freqs, cos=a.cos, sin=a.sin, cos_sin_cache=a.cos_sin_cache, inv_freq=a.inv_freq,
                         base=a.base, rope_scale=a.rope_scale, rotary_dim=a.rotary_dim)


def _rotated(x, a, rd, out):
    return _rope_tensor(x, a.freqs, a.cos, a.sin, a.cos_sin_cache, a.inv_freq, a.base, a.rope_scale, a.mscale,
                        a.layout, a.interleaved, rd, a.rotary_offset, a.positions, a.mrope_section,
                        a.mrope_interleaved, a.offsets, a.cu_seqlens, a.cp_size, a.cp_rank, a.backward, a.inplace, out)


def _rope_tensor(x, freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, layout, interleaved, rd,
                 rotary_offset, positions, mrope_section, mrope_interleaved, offsets, cu_seqlens, cp_size, cp_rank,
                 backward, inplace, out):
    import torch

    f64 = torch.float64
    dev = x.device
    covered = None
    if layout == "thd":
        xs = x.detach().to(f64)[:, None]  # [t, 1, h, d]
        if positions is None:
            positions, covered = packed_positions(cu_seqlens, x.shape[0], offsets, cp_size, cp_rank)
            positions, covered, offsets, cp_size = positions.to(dev), covered.to(dev), None, 1
    else:
        xs = x.detach().to(f64)
        xs = xs if layout == "sbhd" else xs.transpose(0, 1)
    S, B, H, D = xs.shape
    pair = _pair_index(rd, interleaved, dev)
    if mrope_section is None:
        pos = _token_positions(S, B, positions, offsets, dev, cp_size, cp_rank)[..., None].expand(S, B, rd)
    else:  # each feature takes the position row (time, height, width) of its pair's section
        rows = torch.stack([_token_positions(S, B, p, None, dev) for p in positions.unbind(0)], dim=-1)
        pos = rows[..., mrope_pair_sections(mrope_section, rd // 2, mrope_interleaved, dev)[pair]]
    features = torch.arange(rd, device=dev)

    if cos_sin_cache is not None:  # the packed table: cos of the pairs, then their sin
        table = cos_sin_cache.reshape(cos_sin_cache.shape[0], cos_sin_cache.shape[-1])
        cos, sin = table[:, : rd // 2], table[:, rd // 2:]
    if freqs is not None:
        table = freqs.reshape(freqs.shape[0], freqs.shape[-1]).to(f64)
        angle = _lookup(table, pos, features)
        c, s = torch.cos(angle), torch.sin(angle)
    elif cos is not None:
        ct = cos.reshape(cos.shape[0], cos.shape[-1]).to(f64)
        st = sin.reshape(sin.shape[0], sin.shape[-1]).to(f64)
        idx = features if ct.shape[-1] == rd else pair
        c, s = _lookup(ct, pos, idx), _lookup(st, pos, idx)
    else:
        if inv_freq is not None:
            inv = inv_freq.to(device=dev, dtype=f64)
        else:
            i = torch.arange(rd // 2, device=dev, dtype=f64)
            inv = float(base) ** (-2.0 * i / rd)
        angle = pos.to(f64) * float(scale) * inv[pair]
        c, s = torch.cos(angle), torch.sin(angle)

    c, s = c[:, :, None, :] * float(mscale), s[:, :, None, :] * float(mscale)  # shared by every head
    span = slice(rotary_offset, rotary_offset + rd)
    xr = xs[..., span]
    y = xr * c - _rotate(xr * s, interleaved) if backward else xr * c + _rotate(xr, interleaved) * s
    if covered is not None:
        y = torch.where(covered[:, None, None, None], y, xr)
    result = xs.clone()
    result[..., span] = y
    if layout == "thd":
        result = result[:, 0]
    elif layout != "sbhd":
        result = result.transpose(0, 1)
    return _written(result, x, inplace, out)


def _decode_attention(a):
    """float64 attention of one query token per row over keys [kv_start, kv_lens) of each row.

    Same arguments as cukiln.decode_attention (``num_splits`` and ``batch_invariant`` are validated and otherwise
    ignored: the reference is exact, so invariant by construction); returns the
    output shaped like q, as cukiln does, in float64 (or written into ``out``), and with return_lse the
    natural-log log-sum-exp [b, h_q]. A row without keys gives 0 and -inf; a row whose lengths on the device are
    out of range (kv_lens beyond T, kv_start negative or past kv_lens) gives NaN, as the kernel does.
    """
    import math

    import torch

    q, k_cache, v_cache, kv_lens, kv_layout, kv_start = a.q, a.k_cache, a.v_cache, a.kv_lens, a.kv_layout, a.kv_start
    scale, softcap, out, return_lse = a.scale, a.softcap, a.out, a.return_lse
    target = out
    if q.ndim == 4 and q.shape[1] > 1 and q.shape[2] > 1:
        return _token_rows(a)

    q_shape = q.shape
    q = (q.flatten(1, 2) if q.ndim == 4 else q).double()  # [b, 1, h, d] and [b, h, 1, d] -> [b, h, d]
    k, v = (k_cache, v_cache) if kv_layout == "bhsd" else (k_cache.transpose(1, 2), v_cache.transpose(1, 2))
    b, h_q, d = q.shape
    h_kv, capacity = k.shape[1], k.shape[2]
    table = a.block_table
    if table is not None:
        capacity *= table.shape[1]  # k and v are pools [pages, h_kv, page size, d]
    group = h_q // h_kv
    lens = torch.as_tensor(kv_lens, device=q.device).reshape(-1, 1).expand(b, 1).long()
    starts = torch.as_tensor(0 if kv_start is None else kv_start, device=q.device).reshape(-1, 1).expand(b, 1).long()
    # Only the positions some row attends to are converted (a cache may hold billions of elements).
    lo = min(max(int(starts.min()), 0), capacity) if b else 0
    hi = min(max(int(lens.max()), lo), capacity) if b else 0
    t = torch.arange(lo, hi, device=q.device).reshape(1, -1)
    keep = ((t >= starts) & (t < lens)).unsqueeze(1)  # [b, 1, hi - lo]
    malformed = ((lens > capacity) | (starts < 0) | (starts > lens)).reshape(b)
    if table is None:
        k, v = k[:, :, lo:hi].double(), v[:, :, lo:hi].double()
    else:
        (k, v), outside = _unpaged((k, v), table, lo, hi)
        malformed |= (keep[:, 0] & outside).any(dim=1)  # a page outside the pool among a row's keys
    if k_cache.dtype == torch.float8_e4m3fn:  # an FP8 cache holds value / scale: dequantized exactly in float64
        k, v = k * _cache_scale(a.k_scale, h_kv), v * _cache_scale(a.v_scale, h_kv)
    # Query head i reads KV head i // group: [b, h_kv, group, ...] views instead of repeated K/V.
    logits = torch.einsum("bkgd,bktd->bkgt", q.reshape(b, h_kv, group, d), k).reshape(b, h_q, hi - lo)
    logits = logits * (1.0 / math.sqrt(d) if scale is None else scale)
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    logits = logits.masked_fill(~keep, -math.inf)
    lse = torch.logsumexp(logits, dim=-1)  # -inf for a row without keys
    weights = torch.where(keep, torch.exp(logits - lse.unsqueeze(-1).clamp_min(-1e308)), 0.0)
    v = torch.where(keep.unsqueeze(-1), v, 0.0)  # slots a row does not attend to may hold anything, NaN too
    result = torch.einsum("bkgt,bktd->bkgd", weights.reshape(b, h_kv, group, hi - lo), v).reshape(b, h_q, d)
    if a.sinks is not None:  # each head's sink joins the denominator, its value zero
        sink = a.sinks.double().to(q.device).reshape(1, h_q).expand(b, h_q)
        with_sink = torch.logaddexp(lse, sink)
        # a row without keys: 0 (exp(-inf)); and with a sink of -inf too (no weight anywhere): 0, not exp(nan)
        weight = torch.where(torch.isneginf(with_sink), 0.0, torch.exp(lse - with_sink))
        result = result * weight.unsqueeze(-1)
        lse = with_sink
    result = torch.where(malformed[:, None, None], float("nan"), result).reshape(q_shape)
    lse = torch.where(malformed[:, None], float("nan"), lse)
    if target is not None:
        result = target.copy_(result)
    return (result, lse) if return_lse else result


def _token_rows(a):
    """decode_attention of several query tokens a row (q [b, n, h_q, d], ``q_lens`` each row's count): each token a
    row of its own over its row's cache, token j of row i of n_i attending to keys [kv_start, kv_lens - n_i + j + 1)
    (none from n_i on, none where the window starts after them); a row whose counts or lengths are malformed: NaN."""
    import types

    import torch

    q = a.q
    b, n = q.shape[:2]
    device = q.device
    lens = torch.as_tensor(a.kv_lens, device=device).to(torch.int64).reshape(-1).expand(b)
    start = torch.as_tensor(0 if a.kv_start is None else a.kv_start, device=device).to(torch.int64).reshape(-1).expand(b)
    counts = (torch.full((b,), n, device=device) if a.q_lens is None else a.q_lens.to(device, torch.int64))
    j = torch.arange(n, device=device)
    real = j < counts[:, None]
    end = torch.where(real, lens[:, None] - counts[:, None] + j + 1, 0)
    first = torch.where(real, torch.minimum(start[:, None], end), 0)
    capacity = (a.k_cache.shape[2] if a.kv_layout == "bhsd" else a.k_cache.shape[1]) * (
        1 if a.block_table is None else a.block_table.shape[1])
    bad = (lens < 0) | (lens > capacity) | (start < 0) | (start > lens) | (counts < 0) | (counts > n) | (counts > lens)
    # (several tokens a row here: the caches must hold each row's new tokens)
    end = torch.where(bad[:, None], capacity + 1, end)  # past the capacity: the row's NaN
    rows = torch.arange(b, device=device).repeat_interleave(n)

    def each_token(cache):  # (FP8 caches indexed as bytes: not every torch indexes them)
        fp8 = cache.dtype == torch.float8_e4m3fn
        picked = (cache.view(torch.uint8) if fp8 else cache)[rows.to(cache.device)]
        return picked.view(torch.float8_e4m3fn) if fp8 else picked

    paged = a.block_table is not None
    given = dict(vars(a), q=q.reshape(b * n, *q.shape[2:]), kv_lens=end.reshape(-1).to(torch.int32),
                 kv_start=first.reshape(-1).to(torch.int32), q_lens=None, out=None, return_lse=True,
                 k_cache=a.k_cache if paged else each_token(a.k_cache),
                 v_cache=a.v_cache if paged else each_token(a.v_cache),
                 block_table=a.block_table[rows.to(a.block_table.device)] if paged else None)
    result, lse = _decode_attention(types.SimpleNamespace(**given))
    result, lse = result.reshape(q.shape), lse.reshape(b, n, -1)
    if a.out is not None:
        result = a.out.copy_(result)
    return (result, lse) if a.return_lse else result


def _unpaged(pools, table, lo: int, hi: int):
    """Keys [lo, hi) of every row of paged pools ([pages, h_kv, page size, d] each) through ``table`` [b, max_pages]:
    ([b, h_kv, hi - lo, d] float64 per pool, and [b, hi - lo] whether the key's page lies outside the pool (read as
    zeros))."""
    import torch

    pages, page_size = pools[0].shape[0], pools[0].shape[2]
    t = torch.arange(lo, hi, device=table.device)
    page = table.long()[:, t // page_size]  # [b, hi - lo]
    outside = (page < 0) | (page >= pages)
    page, slot = page.clamp(0, max(pages - 1, 0)).to(pools[0].device), (t % page_size).to(pools[0].device)
    gathered = tuple(torch.where(outside.to(p.device)[:, None, :, None], 0.0, p[page, :, slot].double().permute(0, 2, 1, 3))
                     for p in pools)  # p[page, :, slot]: [b, hi - lo, h_kv, d]
    return gathered, outside.to(pools[0].device)


def _merge_attention(a):
    """float64 merge of k partial attention results: the attention over the union of their key sets (zeros and -inf
    for a row and head whose parts are all empty, NaN where a part's lse is NaN); the output in float64 (or written
    into ``out``), and with return_lse the merged natural-log log-sum-exp; ``sinks``: each head's a part of output
    zero."""
    import torch

    outs, lses = a.outs.double(), a.lses.double()
    if a.sinks is not None:  # each head's sink: one more part, of output zero
        outs = torch.cat((outs, torch.zeros_like(outs[:1])))
        lses = torch.cat((lses, a.sinks.double().to(lses.device).reshape(1, 1, -1).expand(1, *lses.shape[1:])))
    result, lse = _merged(outs, lses)
    if a.out is not None:
        result = a.out.copy_(result)
    return (result, lse) if a.return_lse else result


def _merged(outs, lses):
    """The attention over the union of k disjoint key sets from each set's result: ``outs`` [k, b, h, d] and ``lses``
    [k, b, h] (natural log) -> (out [b, h, d] in outs' dtype, lse [b, h]), each partial weighted by exp(lse_i - lse),
    in fp32 (float64 for float64 partials, as the references give). A row whose partials are all empty (lse -inf) gives
    zeros and -inf; a NaN anywhere in a row's lses makes its output and lse NaN."""
    import torch

    work = torch.float64 if outs.dtype == torch.float64 else torch.float32
    lses = lses.to(work)
    top = lses.amax(dim=0)
    base = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # -inf - -inf is NaN; a NaN stays in lses
    weights = torch.exp(lses - base)
    total = weights.sum(dim=0)
    merged = (weights.unsqueeze(-1) * outs.to(work)).sum(dim=0) / total.unsqueeze(-1)
    merged = torch.where((total == 0).unsqueeze(-1), torch.zeros_like(merged), merged)
    return merged.to(outs.dtype), base + torch.log(total)


def _cache_scale(scale, heads_kv: int):
    """An FP8 cache's scale (None: 1, a number, or a 0-d or [h_kv] tensor) as a float64 factor of [b, h_kv, T, d]."""
    import torch

    if scale is None or not isinstance(scale, torch.Tensor):
        return 1.0 if scale is None else float(scale)
    return scale.double().reshape(1, -1, 1, 1).expand(1, heads_kv, 1, 1)


def _stored(x, scale, dtype):
    """What a cache of ``dtype`` holds for the float values ``x`` [h_kv, d]: x itself, or in an FP8 cache x / scale
    rounded to e4m3 with saturation to its finite range (NaN stays NaN), as the kernels store it."""
    import torch

    from .fp8_scales import quantize_e4m3

    return quantize_e4m3(x.double(), scale) if dtype == torch.float8_e4m3fn else x.to(dtype)


def _kv_append(a):
    """float64 kv_append: the rotated query (new, or written to q / out) and the caches written in place, each new
    key normalized (QK-norm, when its weight is given) and rotated by the float64 RoPE reference at its position;
    rows that do not fit write nothing and get NaN queries, as the kernels do. Lengths are read on the host."""
    import torch

    q, k_new, v_new, k_cache, v_cache, kv_layout = a.q, a.k_new, a.v_new, a.k_cache, a.v_cache, a.kv_layout
    three = q.ndim == 3
    q4, k4, v4 = (t[:, None] if three else t for t in (q, k_new, v_new))
    b, n = q4.shape[:2]
    T = k_cache.shape[2] if kv_layout == "bhsd" else k_cache.shape[1]  # a paged pool's: its page size
    table = None if a.block_table is None else a.block_table.to(torch.int64).cpu()
    flat = None if a.slot_mapping is None else a.slot_mapping.to(torch.int64).cpu().reshape(b, n)
    page_size, pages = T, k_cache.shape[0]
    if table is not None:
        T = table.shape[1] * page_size
    elif flat is not None:
        T = 2**62  # a flat slot per token: no row capacity
    lens = torch.as_tensor(a.kv_lens).to(torch.int64).cpu().expand(b)
    start = torch.as_tensor(0 if a.kv_start is None else a.kv_start).to(torch.int64).cpu().expand(b)
    slots = lens[:, None] + torch.arange(n)
    pos = (slots - start[:, None]) if a.positions is None else a.positions.to(torch.int64).cpu().reshape(b, n)
    valid = (lens >= 0) & (lens + n <= T) & (start >= 0) & (start <= lens)
    angles = dict(freqs=a.freqs, cos=a.cos, sin=a.sin, cos_sin_cache=a.cos_sin_cache, inv_freq=a.inv_freq,
                  base=a.base, rope_scale=a.rope_scale, mscale=a.mscale, interleaved=a.interleaved,
                  rotary_dim=a.rotary_dim, rotary_offset=a.rotary_offset)
    rd = rotary_dim_of(q4[:1, :1, :1].detach(), **angles)
    if a.q_norm_weight is not None or a.k_norm_weight is not None:
        # normalized heads are float64: the reference then takes float64 tables too (their values unchanged)
        q4, k4 = (x if w is None else rms_norm(x, w, a.norm_eps) for x, w in ((q4, a.q_norm_weight),
                                                                            (k4, a.k_norm_weight)))
        angles = {name: t.double() if hasattr(t, "is_floating_point") and t.is_floating_point() else t
                  for name, t in angles.items()}
    # each row's new tokens as a [n, 1, h, d] sbhd tensor, at that row's positions
    # (the reference takes the tensors in their own dtypes, which its checks of the tables' dtypes read)
    rope = __getattr__("rope")
    q_rot = torch.stack([rope(q4[i].detach()[:, None], positions=pos[i].to(q.device), **angles)[:, 0]
                         for i in range(b)]) if b else q4.double()
    k_rot = torch.stack([rope(k4[i].detach()[:, None], positions=pos[i].to(q.device), **angles)[:, 0]
                         for i in range(b)]) if b else k4.double()
    rotated = (a.rotary_offset, a.rotary_offset + rd)
    heads_kv = k4.shape[2]
    k_scale, v_scale = (_cache_scale(x, heads_kv).reshape(-1, 1) if isinstance(x, torch.Tensor) else x
                        for x in (a.k_scale, a.v_scale))
    for i in range(b):
        if not valid[i]:
            q_rot[i, ..., rotated[0]:rotated[1]] = float("nan")
            continue
        for j in range(n):
            row, s = i, int(slots[i, j])  # the cache's row and slot, or a paged pool's page and its slot
            if table is not None or flat is not None:
                at = s if table is not None else int(flat[i, j])
                row, s = (int(table[i, at // page_size]) if table is not None else at // page_size), at % page_size
                if at < 0 or not 0 <= row < pages:
                    continue  # not stored: padding, or a page outside the pool
            k_row, v_row = (_stored(x, scale, k_cache.dtype) for x, scale in ((k_rot[i, j], k_scale),
                                                                              (v4[i, j], v_scale)))
            if kv_layout == "bhsd":
                k_cache[row, :, s] = k_row
                v_cache[row, :, s] = v_row
            else:
                k_cache[row, s] = k_row
                v_cache[row, s] = v_row
    if a.kv_lens_out is not None:
        a.kv_lens_out.copy_(lens + n)
    result = q_rot[:, 0] if three else q_rot
    target = q if a.inplace else a.out
    if target is None:
        return result
    target.copy_(result)
    return target


def _decode_step(a):
    """float64 decode_step: the float64 kv_append (writing the caches), then the float64 decode attention over each
    row's keys including the new one. ``num_splits`` is ignored (it changes no result)."""
    import torch

    kv_append, decode_attention = __getattr__("kv_append"), __getattr__("decode_attention")
    q_rot = kv_append(a.q, a.k_new, a.v_new, a.k_cache, a.v_cache, a.kv_lens, kv_layout=a.kv_layout,
                      kv_start=a.kv_start, positions=a.positions, freqs=a.freqs, cos=a.cos, sin=a.sin,
                      cos_sin_cache=a.cos_sin_cache, inv_freq=a.inv_freq, base=a.base, rope_scale=a.rope_scale,
                      mscale=a.mscale, interleaved=a.interleaved, rotary_dim=a.rotary_dim,
                      rotary_offset=a.rotary_offset, q_norm_weight=a.q_norm_weight, k_norm_weight=a.k_norm_weight,
                      norm_eps=a.norm_eps, k_scale=a.k_scale, v_scale=a.v_scale, block_table=a.block_table)
    lens_after = a.kv_lens + 1 if type(a.kv_lens) is int else (a.kv_lens.to(torch.int32) + 1).to(a.q.device)
    # the attention reads the rotated query as the append stores it, in q's dtype (as the rotated keys in the cache)
    result = decode_attention(q_rot.to(a.q.dtype), a.k_cache, a.v_cache, lens_after,
                              kv_layout=a.kv_layout, kv_start=a.kv_start, scale=a.scale, softcap=a.softcap,
                              out=a.out, return_lse=a.return_lse, k_scale=a.k_scale, v_scale=a.v_scale,
                              block_table=a.block_table, sinks=a.sinks)
    if a.advance_lens:
        a.kv_lens.add_(1)
    return result
