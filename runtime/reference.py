"""float64 reference implementations, written for clarity: the tests' ground truth.

Same API as the kernels; the result is a new float64 tensor of x's shape (``inplace`` and ``out`` are
accepted and ignored). Plain PyTorch, so it runs on the CPU or on the GPU.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    """References defined in other runtime modules: the generated families table names each one's module, or
    "module:function" where the function's name is not the public one."""
    from cukiln.generated.families import REFERENCE

    where = REFERENCE.get(name)
    if where is None or where == "reference":
        raise AttributeError(f"module 'cukiln.reference' has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(f"cukiln.{module}"), attribute or name)


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


def _lookup(table, pos):
    """table[pos] for a [rows, width] table; NaN rows for positions outside it."""
    import torch

    rows = table.shape[0]
    valid = (pos >= 0) & (pos < rows)
    got = table[pos.clamp(0, rows - 1)]
    return torch.where(valid[..., None], got, torch.full_like(got, float("nan")))


def rope(x, *, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
         interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1,
         cp_rank=0, max_seqlen=None, backward=False, inplace=False, out=None):
    """float64 RoPE: y = x*cos + rot(x)*sin forward, g = x*cos - rot(x*sin) backward (see cukiln.rope).

    thd tokens outside every sequence come back unchanged.
    """
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
    pos = _token_positions(S, B, positions, offsets, dev, cp_size, cp_rank)

    if freqs is not None:
        table = freqs.reshape(freqs.shape[0], freqs.shape[-1]).to(f64)
        rd = rotary_dim or table.shape[-1]
        angle = _lookup(table, pos)
        c, s = torch.cos(angle), torch.sin(angle)
    elif cos is not None:
        ct = cos.reshape(cos.shape[0], cos.shape[-1]).to(f64)
        st = sin.reshape(sin.shape[0], sin.shape[-1]).to(f64)
        rd = rotary_dim or ct.shape[-1]
        idx = torch.arange(rd, device=dev) if ct.shape[-1] == rd else _pair_index(rd, interleaved, dev)
        c, s = _lookup(ct, pos)[..., idx], _lookup(st, pos)[..., idx]
    else:
        if inv_freq is not None:
            rd = rotary_dim or 2 * inv_freq.shape[0]
            inv = inv_freq.to(device=dev, dtype=f64)
        else:
            rd = rotary_dim or D
            i = torch.arange(rd // 2, device=dev, dtype=f64)
            inv = float(base) ** (-2.0 * i / rd)
        angle = pos[..., None].to(f64) * float(scale) * inv[_pair_index(rd, interleaved, dev)]
        c, s = torch.cos(angle), torch.sin(angle)

    c, s = c[:, :, None, :], s[:, :, None, :]  # shared by every head
    xr = xs[..., :rd]
    y = xr * c - _rotate(xr * s, interleaved) if backward else xr * c + _rotate(xr, interleaved) * s
    if covered is not None:
        y = torch.where(covered[:, None, None, None], y, xr)
    result = xs.clone()
    result[..., :rd] = y
    if layout == "thd":
        return result[:, 0]
    return result if layout == "sbhd" else result.transpose(0, 1)


def decode_attention(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
                     num_splits=None, out=None, return_lse=False):
    """float64 attention of one query token per row over keys [kv_start, kv_lens) of each row.

    Same arguments as cukiln.decode_attention (``num_splits`` and ``out`` are accepted and ignored);
    returns the output shaped like q, as cukiln does, in float64 (and the natural-log log-sum-exp [b, h_q]
    with return_lse).
    A row without keys gives 0 and -inf.
    """
    import math

    import torch

    q_shape = q.shape
    q = (q.flatten(1, 2) if q.ndim == 4 else q).double()  # [b, 1, h, d] and [b, h, 1, d] -> [b, h, d]
    k, v = (k_cache, v_cache) if kv_layout == "bhsd" else (k_cache.transpose(1, 2), v_cache.transpose(1, 2))
    b, h_q, d = q.shape
    h_kv, capacity = k.shape[1], k.shape[2]
    group = h_q // h_kv
    lens = torch.as_tensor(kv_lens, device=q.device).reshape(-1, 1).expand(b, 1).long()
    starts = torch.as_tensor(0 if kv_start is None else kv_start, device=q.device).reshape(-1, 1).expand(b, 1).long()
    # Only the positions some row attends to are converted (a cache may hold billions of elements).
    lo = min(max(int(starts.min()), 0), capacity) if b else 0
    hi = min(max(int(lens.max()), lo), capacity) if b else 0
    k, v = k[:, :, lo:hi].double(), v[:, :, lo:hi].double()
    # Query head i reads KV head i // group: [b, h_kv, group, ...] views instead of repeated K/V.
    logits = torch.einsum("bkgd,bktd->bkgt", q.reshape(b, h_kv, group, d), k).reshape(b, h_q, hi - lo)
    logits = logits * (1.0 / math.sqrt(d) if scale is None else scale)
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    t = torch.arange(lo, hi, device=q.device).reshape(1, -1)
    keep = ((t >= starts) & (t < lens)).unsqueeze(1)  # [b, 1, hi - lo]
    logits = logits.masked_fill(~keep, -math.inf)
    lse = torch.logsumexp(logits, dim=-1)  # -inf for a row without keys
    weights = torch.where(keep, torch.exp(logits - lse.unsqueeze(-1).clamp_min(-1e308)), 0.0)
    v = torch.where(keep.unsqueeze(-1), v, 0.0)  # slots a row does not attend to may hold anything, NaN too
    result = torch.einsum("bkgt,bktd->bkgd", weights.reshape(b, h_kv, group, hi - lo), v).reshape(q_shape)
    return (result, lse) if return_lse else result
