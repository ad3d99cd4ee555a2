"""cukiln.torch: the kernels as torch.library custom ops, for autograd, torch.compile and CUDA graphs.

    cukiln.torch.rope(x, ...)               same signature as cukiln.rope; differentiable in x
    cukiln.torch.decode_attention(q, ...)   same signature as cukiln.decode_attention

Ops: ``cukiln::rope`` (out of place), ``cukiln::rope_`` (in place, declared as mutating x) and
``cukiln::decode_attention`` (returns the output and the log-sum-exp). Each has a fake (meta)
implementation, so torch.compile traces them without running them. Gradients: rope's backward is cukiln's
backward kernel on the incoming gradient (the exact vector-Jacobian product); angle tables, positions,
offsets and cu_seqlens get none. In-place rope and decode attention are not differentiable.
Arguments that take an int or a tensor in cukiln (offsets, kv_lens, kv_start) travel as two op arguments.
"""

from __future__ import annotations

from typing import Optional

import torch

from .decode_api import decode_attention as _decode_attention
from .rope_api import rope as _rope


def _rope_kwargs(freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions,
                 offsets_tensor, offset, cu_seqlens, cp_size, cp_rank, max_seqlen) -> dict:
    return dict(freqs=freqs, cos=cos, sin=sin, inv_freq=inv_freq, base=base, scale=scale, layout=layout,
                interleaved=interleaved, rotary_dim=rotary_dim, positions=positions,
                offsets=offsets_tensor if offsets_tensor is not None else offset, cu_seqlens=cu_seqlens,
                cp_size=cp_size, cp_rank=cp_rank, max_seqlen=max_seqlen)


@torch.library.custom_op("cukiln::rope", mutates_args=())
def _rope_op(x: torch.Tensor, freqs: Optional[torch.Tensor], cos: Optional[torch.Tensor],
             sin: Optional[torch.Tensor], inv_freq: Optional[torch.Tensor], base: Optional[float], scale: float,
             layout: str, interleaved: bool, rotary_dim: Optional[int], positions: Optional[torch.Tensor],
             offsets_tensor: Optional[torch.Tensor], offset: int, cu_seqlens: Optional[torch.Tensor],
             cp_size: int, cp_rank: int, max_seqlen: Optional[int], backward: bool) -> torch.Tensor:
    kwargs = _rope_kwargs(freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions,
                          offsets_tensor, offset, cu_seqlens, cp_size, cp_rank, max_seqlen)
    return _rope(x, backward=backward, out=torch.empty_like(x), **kwargs)


@_rope_op.register_fake
def _(x, *args):
    return torch.empty_like(x)


@torch.library.custom_op("cukiln::rope_", mutates_args=("x",))
def _rope_inplace_op(x: torch.Tensor, freqs: Optional[torch.Tensor], cos: Optional[torch.Tensor],
                     sin: Optional[torch.Tensor], inv_freq: Optional[torch.Tensor], base: Optional[float],
                     scale: float, layout: str, interleaved: bool, rotary_dim: Optional[int],
                     positions: Optional[torch.Tensor], offsets_tensor: Optional[torch.Tensor], offset: int,
                     cu_seqlens: Optional[torch.Tensor], cp_size: int, cp_rank: int, max_seqlen: Optional[int],
                     backward: bool) -> None:
    kwargs = _rope_kwargs(freqs, cos, sin, inv_freq, base, scale, layout, interleaved, rotary_dim, positions,
                          offsets_tensor, offset, cu_seqlens, cp_size, cp_rank, max_seqlen)
    _rope(x, backward=backward, inplace=True, **kwargs)


@_rope_inplace_op.register_fake
def _(x, *args):
    return None


def _rope_setup_context(ctx, inputs, output):
    ctx.arguments = inputs[1:]  # everything but x: the backward reuses them with the direction flipped


def _rope_backward(ctx, grad):
    *arguments, backward = ctx.arguments
    grad_x = _rope_op(grad, *arguments, not backward)
    return (grad_x,) + (None,) * len(ctx.arguments)


_rope_op.register_autograd(_rope_backward, setup_context=_rope_setup_context)


def rope(x, *, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
         interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1, cp_rank=0,
         max_seqlen=None, backward=False, inplace=False, out=None):
    """cukiln.rope through the custom ops (see cukiln.rope for the arguments). ``out=`` is not supported
    here: an op returns a new tensor or mutates x (``inplace=True``)."""
    if out is not None:
        raise ValueError("out: cukiln.torch.rope returns a new tensor (or rotates x with inplace=True); "
                         "use cukiln.rope for out=")
    offsets_tensor = offsets if isinstance(offsets, torch.Tensor) else None
    offset = 0 if offsets is None or offsets_tensor is not None else offsets
    args = (x, freqs, cos, sin, inv_freq, None if base is None else float(base), float(scale), layout,
            bool(interleaved), rotary_dim, positions, offsets_tensor, offset, cu_seqlens, cp_size, cp_rank,
            max_seqlen, bool(backward))
    if inplace:
        torch.ops.cukiln.rope_(*args)
        return x
    return torch.ops.cukiln.rope(*args)


@torch.library.custom_op("cukiln::decode_attention", mutates_args=())
def _decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_lens_tensor: Optional[torch.Tensor],
               kv_len: int, kv_layout: str, kv_start_tensor: Optional[torch.Tensor], kv_start: int,
               scale: Optional[float], softcap: Optional[float], num_splits: Optional[int]
               ) -> tuple[torch.Tensor, torch.Tensor]:
    return _decode_attention(q, k_cache, v_cache, kv_lens_tensor if kv_lens_tensor is not None else kv_len,
                             kv_layout=kv_layout,
                             kv_start=kv_start_tensor if kv_start_tensor is not None else kv_start,
                             scale=scale, softcap=softcap, num_splits=num_splits, return_lse=True)


@_decode_op.register_fake
def _(q, k_cache, v_cache, *args):
    b, d = q.shape[0], q.shape[-1]
    heads = q.numel() // max(b * d, 1)
    out = q.new_empty((b, heads, d)).view(q.shape)
    return out, q.new_empty((b, heads), dtype=torch.float32)


def decode_attention(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
                     num_splits=None, out=None, return_lse=False):
    """cukiln.decode_attention through the custom op (see there for the arguments); ``out=`` is not
    supported here."""
    if out is not None:
        raise ValueError("out: cukiln.torch.decode_attention returns a new tensor; use cukiln.decode_attention "
                         "for out=")
    if not isinstance(kv_lens, (int, torch.Tensor)) or isinstance(kv_lens, bool):
        raise TypeError(f"kv_lens: expected an int or an int32 tensor [b], got {type(kv_lens).__name__}")
    lens_tensor = kv_lens if isinstance(kv_lens, torch.Tensor) else None
    start_tensor = kv_start if isinstance(kv_start, torch.Tensor) else None
    result, lse = torch.ops.cukiln.decode_attention(
        q, k_cache, v_cache, lens_tensor, 0 if lens_tensor is not None else kv_lens, kv_layout, start_tensor,
        0 if start_tensor is not None or kv_start is None else kv_start,
        None if scale is None else float(scale), None if softcap is None else float(softcap), num_splits)
    return (result, lse) if return_lse else result
