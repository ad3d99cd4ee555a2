"""cukiln.decode_attention: one query token per row over a fixed-capacity KV cache, read in place."""

from __future__ import annotations

import os

from cukiln.generated import dispatch

from .decode_plan import PIPELINE_ENV, PIPELINES, DecodePlan, plan_decode
from .interop import call_with_foreign_arrays, is_plain_torch_call
from .launch import launch
from .loader import KERNELS
from .tensors import from_torch, refuse_untracked_gradients


def decode_attention(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
                     num_splits=None, out=None, return_lse=False, stream=None):
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
    table's choice on small grids; ``CUKILN_DECODE_PIPELINE=narrow|deep|wide`` forces a pipeline, for checks
    and measurements.
    out: q-shaped output (allocated when None). return_lse: also return the natural-log log-sum-exp of
    the scaled logits, fp32 [b, h_q].
    Runs on the current torch stream without synchronizing (``stream=`` picks another); CUDA-graph
    capturable. CuPy, JAX or any ``__dlpack__`` / ``__cuda_array_interface__`` arrays are taken without a
    copy and the results come back in q's framework (see cukiln.interop).
    Not differentiable: with grad mode on, q, k_cache, v_cache or out requiring grad is refused.
    """
    if not is_plain_torch_call(q, stream):  # other frameworks' arrays, or a stream named
        return call_with_foreign_arrays(decode_attention, locals())
    import torch

    refuse_untracked_gradients("cukiln.decode_attention",
                               (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out)))
    plan, result, tensors = _plan(q, k_cache, v_cache, kv_lens, kv_layout=kv_layout, kv_start=kv_start,
                                  scale=scale, softcap=softcap, num_splits=num_splits, out=out, return_lse=return_lse)
    lse = torch.empty((plan.batch, plan.heads_q), dtype=torch.float32, device=q.device) if return_lse else None
    if plan.batch * plan.heads_q > 0:
        _launch(plan, result, lse, tensors)
        if out is not None:  # the caller's out, written behind autograd's back: bump its version (see rope)
            torch._C._increment_version((out,))
    return (result, lse) if return_lse else result


def plan_call(q, k_cache, v_cache, kv_lens, **kwargs) -> DecodePlan:
    """Validate a decode_attention call and plan it without launching."""
    kwargs.setdefault("kv_layout", "bhsd")
    for name in ("kv_start", "scale", "softcap", "num_splits", "out"):
        kwargs.setdefault(name, None)
    kwargs.setdefault("return_lse", False)
    return _plan(q, k_cache, v_cache, kv_lens, **kwargs)[0]


def _plan(q, k_cache, v_cache, kv_lens, *, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse):
    """Validate and plan: (plan, output tensor, tensors the launch must keep alive)."""
    import torch

    qi = from_torch(q, "q")
    ki, vi = from_torch(k_cache, "k_cache"), from_torch(v_cache, "v_cache")
    lengths = []
    for name, value in (("kv_lens", kv_lens), ("kv_start", kv_start)):
        if isinstance(value, torch.Tensor):
            if value.dtype != torch.int32:
                raise TypeError(f"{name}: expected an int32 tensor, got {str(value.dtype).replace('torch.', '')}")
            if value.device.type == "cpu":
                value = _host_lengths(value, name, kv_lens, kv_start, ki, kv_layout).to(q.device)
            lengths.append((value, from_torch(value, name)))
        else:
            lengths.append((value, value))
    if kv_lens is None:
        raise TypeError("kv_lens: expected an int or an int32 tensor [b], got None")
    oi = from_torch(out, "out") if out is not None else None
    device = qi.device
    plan = plan_decode(qi, ki, vi, lengths[0][1], kv_layout=kv_layout, kv_start=lengths[1][1], scale=scale,
                       softcap=softcap, num_splits=num_splits, out=oi, return_lse=return_lse,
                       sms=KERNELS.sm_count(device), arch=KERNELS.arch(device),
                       max_shared=KERNELS.max_shared_per_block(device),
                       resident=lambda module, symbol, shared: KERNELS.resident_blocks(
                           device, module, symbol, 32 * dispatch.DECODE_WARPS, shared),
                       active_clusters=lambda module, symbol, shared, cluster: KERNELS.active_clusters(
                           device, module, symbol, 32 * dispatch.DECODE_WARPS, shared, cluster),
                       pipeline=_forced_pipeline())
    if out is None:
        out = torch.empty((plan.batch, plan.heads_q, plan.head_dim), dtype=q.dtype, device=q.device).view(q.shape)
    return plan, out, (lengths[0][0], lengths[1][0])


def _forced_pipeline() -> str | None:
    """The K/V pipeline forced by CUKILN_DECODE_PIPELINE (unset or "auto": None, the dispatch table's choice)."""
    value = os.environ.get(PIPELINE_ENV, "auto")
    if value == "auto":
        return None
    if value not in PIPELINES:
        raise ValueError(f"{PIPELINE_ENV}: expected one of {PIPELINES} or auto, got {value!r}")
    return value


def _host_lengths(value, name, kv_lens, kv_start, k_info, kv_layout):
    """A CPU kv_lens / kv_start: check every value (the device copy then needs no NaN rows)."""
    import torch

    if k_info.ndim != 4:
        return value  # the plan explains the cache's shape
    capacity = k_info.shape[2] if kv_layout == "bhsd" else k_info.shape[1]
    values = value.tolist()
    if name == "kv_lens" and any(not 0 <= n <= capacity for n in values):
        raise ValueError(f"kv_lens: expected values in [0, T = {capacity}], got {values}")
    if name == "kv_start":
        lens = kv_lens.tolist() if isinstance(kv_lens, torch.Tensor) else [kv_lens] * len(values)
        if any(not 0 <= s <= n for s, n in zip(values, lens)):
            raise ValueError(f"kv_start: expected 0 <= kv_start <= kv_lens per row, got {values} for kv_lens {lens}")
    return value


def _launch(plan: DecodePlan, out, lse, tensors) -> None:
    import torch

    stream = torch._C._cuda_getCurrentRawStream(plan.device)
    partial_out = partial_lse = None
    if plan.combine is not None:
        shape = (plan.batch, plan.heads_q, plan.num_splits)
        partial_out = torch.empty(shape + (plan.head_dim,), dtype=torch.float32, device=out.device)
        partial_lse = torch.empty(shape, dtype=torch.float32, device=out.device)
    attention, combine = plan.values(
        out=out.data_ptr(), lse=lse.data_ptr() if lse is not None else 0,
        partial_out=partial_out.data_ptr() if partial_out is not None else 0,
        partial_lse=partial_lse.data_ptr() if partial_lse is not None else 0)
    a = plan.attention
    launch(plan.device, a.module, a.symbol, a.fmt, attention, a.grid, a.block, stream, a.shared, a.overlap_previous,
           a.cluster)
    if plan.combine is not None:
        c = plan.combine
        launch(plan.device, c.module, c.symbol, c.fmt, combine, c.grid, c.block, stream, c.shared, c.overlap_previous)
    del tensors  # kept alive until both launches are queued (the caching allocator orders reuse by stream)
