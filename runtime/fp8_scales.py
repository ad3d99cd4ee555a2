"""FP8 (e4m3) KV caches on the host: cukiln.kv_scales, the scales of a cache from a calibration batch (for kv_append,
decode_attention and decode_step's k_scale / v_scale), and quantize_e4m3, what such a cache holds for given values
(as the kernels store them: the references and the transformers cache store with it)."""

from __future__ import annotations

from .tensors import E4M3_MAX


def quantize_e4m3(x, scale=None):
    """What an FP8 (e4m3) cache holds for the values ``x``: x / scale (None: 1; a number, or a tensor broadcasting
    against x) rounded to e4m3 with saturation to its finite range, ±448 (an infinity too; NaN stays NaN), in x's
    precision (float64 stays float64; narrower types go through float32)."""
    import torch

    wide = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return (wide / (1.0 if scale is None else scale)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def kv_scales(x, head_axis: int = 1, per_head: bool = True):
    """The scale that lets an FP8 (e4m3) cache hold ``x`` without saturating: amax(|x|) / 448, per KV head (an fp32
    tensor [h_kv], the heads along ``head_axis``: 1 for bhsd caches or [b, h_kv, d] new tokens, 2 for bshd caches or
    [b, n, h_kv, d]) or over all of x with ``per_head=False`` (a 0-d fp32 tensor), on x's device. A head whose values
    are all zero (or that has none) gets 1. Reads the amax back to check it (a calibration step, not a decode step):
    non-finite values in x raise ValueError."""
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x: expected a floating-point torch.Tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if per_head and not -x.ndim <= head_axis < x.ndim:
        raise ValueError(f"head_axis: expected an axis of x's {x.ndim}, got {head_axis}")
    values = x.detach().float().abs()
    if per_head:
        values = values.movedim(head_axis, 0).reshape(x.shape[head_axis], -1)
        amax = values.amax(dim=1) if values.shape[1] else torch.zeros(values.shape[0], device=x.device)
    else:
        amax = values.amax() if values.numel() else torch.zeros((), device=x.device)
    if not bool(torch.isfinite(amax).all()):
        raise ValueError("x: holds non-finite values (inf or NaN), which no scale keeps in an FP8 cache")
    return torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
