"""cukiln.rope: rotary position embedding for sbhd and bshd tensors of any strides, without copies."""

from __future__ import annotations

from .launch import launch
from .rope_plan import plan_rope
from .tensors import TensorInfo, from_torch


def rope(x, *, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
         interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1,
         cp_rank=0, backward=False, inplace=False, out=None):
    """Rotate the first ``rotary_dim`` features of every head of ``x`` by position-dependent angles.

    x: [s, b, h, d] (layout "sbhd") or [b, s, h, d] ("bshd"), fp32/fp16/bf16, any strides, on a CUDA device.
    Angles, exactly one source: ``freqs`` [max_pos, rotary_dim] fp32 angles (sin/cos taken in the kernel);
    ``cos``/``sin`` caches [max_pos, rotary_dim] or [max_pos, rotary_dim/2] in fp32 or x's dtype;
    ``inv_freq`` [rotary_dim/2] fp32 with angle = position * scale * inv_freq[i]; or ``base``, with
    inv_freq[i] = base ** (-2i / rotary_dim). Tables of shape [max_pos, 1, 1, width] are accepted.
    rotary_dim defaults to the table width (freqs, cos/sin), 2 * len(inv_freq), or d (base).
    Positions: the sequence index plus ``offsets`` (an int or an int tensor [b]), or explicit
    ``positions`` ([s] or [b, s] ints). A position outside a table that only the device knows (from a
    positions or offsets tensor) makes that token's rotated features NaN; nothing is read out of bounds.
    ``backward=True`` applies the exact vector-Jacobian product of the forward to a gradient x.
    ``inplace=True`` rotates x itself, reading and writing only the rotated features; otherwise the
    result goes to ``out`` (allocated like x when None) and features [rotary_dim:] are copied over.
    Runs on the current torch stream without synchronizing. Returns the output tensor.
    """
    plan, out = plan_call(
        x, freqs=freqs, cos=cos, sin=sin, inv_freq=inv_freq, base=base, scale=scale, layout=layout,
        interleaved=interleaved, rotary_dim=rotary_dim, positions=positions, offsets=offsets,
        cu_seqlens=cu_seqlens, cp_size=cp_size, cp_rank=cp_rank, backward=backward, inplace=inplace, out=out)
    if plan is not None:
        import torch

        stream = torch.cuda.current_stream(x.device).cuda_stream
        launch(plan.device, plan.module, plan.symbol, plan.fmt, plan.values, plan.grid, plan.block, stream)
    return out


def plan_call(x, *, freqs=None, cos=None, sin=None, inv_freq=None, base=None, scale=1.0, layout="sbhd",
              interleaved=False, rotary_dim=None, positions=None, offsets=None, cu_seqlens=None, cp_size=1,
              cp_rank=0, backward=False, inplace=False, out=None):
    """Validate a rope() call and plan its launch without launching: (RopePlan or None, output tensor)."""
    import torch

    if layout == "thd" or cu_seqlens is not None or cp_size != 1 or cp_rank != 0:
        raise NotImplementedError("layout 'thd', cu_seqlens and context parallel (cp_size/cp_rank) are not "
                                  "supported by this version; use layout 'sbhd' or 'bshd'")
    xi = from_torch(x, "x")
    if inplace:
        if out is not None and out is not x:
            raise ValueError("out: inplace=True writes x itself; got a different out tensor")
        out = x
    elif out is None:
        out = torch.empty_like(x)
    tensors = {"freqs": freqs, "cos": cos, "sin": sin, "inv_freq": inv_freq, "positions": positions}
    infos = {name: from_torch(t, name) for name, t in tensors.items() if t is not None}
    offsets_info = offsets if offsets is None or isinstance(offsets, int) else from_torch(offsets, "offsets")
    guarded = tuple(infos.items()) + ((("offsets", offsets_info),) if isinstance(offsets_info, TensorInfo) else ())
    plan = plan_rope(
        xi, from_torch(out, "out"), freqs=infos.get("freqs"), cos=infos.get("cos"), sin=infos.get("sin"),
        inv_freq=infos.get("inv_freq"), base=base, scale=scale, layout=layout, interleaved=interleaved,
        rotary_dim=rotary_dim, positions=infos.get("positions"), offsets=offsets_info, backward=backward,
        inplace=inplace, guarded=guarded,
    )
    return plan, out
