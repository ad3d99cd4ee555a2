"""Decode attention as a torch op: ``cukiln::decode_attention`` (returns the output and the log-sum-exp), with a
fake kernel for torch.compile; ``decode_attention`` is cukiln.torch.decode_attention. Not differentiable: given
a tensor that requires grad (grad mode on), it raises rather than return a result autograd would treat as a
constant. kv_lens and kv_start (an int or a tensor) travel as two op arguments each."""

from __future__ import annotations

import torch

from .specialize import call as specialized_call
from .decode_api import decode_attention as _decode_attention
from .decode_api import describe_op, run_decode
from .tensors import refuse_untracked_gradients
from .torch_support import (LIBRARY, PUBLIC_CALLS, attention_callers, direct, eager, fake, implement, one_graph_node,
                            untracked)

__all__ = ["decode_attention"]

LIBRARY.define("decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor? kv_lens_tensor, SymInt kv_len, "
               "str kv_layout, Tensor? kv_start_tensor, SymInt kv_start, float? scale, float? softcap, "
               "int? num_splits, bool batch_invariant=False) -> (Tensor, Tensor)")


def _decode_kernel(q, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start, scale,
                   softcap, num_splits, batch_invariant=False):
    return run_decode(q, k_cache, v_cache, kv_lens_tensor if kv_lens_tensor is not None else kv_len, kv_layout,
                      kv_start_tensor if kv_start_tensor is not None else kv_start, scale, softcap, num_splits,
                      None, True, batch_invariant)



@fake("decode_attention")
def _(q, k_cache, v_cache, *args):
    b, d = q.shape[0], q.shape[-1]
    heads = q.numel() // max(b * d, 1)
    out = q.new_empty((b, heads, d)).view(q.shape)
    return out, q.new_empty((b, heads), dtype=torch.float32)


_decode_op = torch.ops.cukiln.decode_attention.default


def _decode_autograd(q, k_cache, v_cache, *arguments):
    if eager(q):
        if q.requires_grad or k_cache.requires_grad or v_cache.requires_grad:
            refuse_untracked_gradients("cukiln::decode_attention",
                                       (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)))
        return _decode_kernel(q, k_cache, v_cache, *arguments)
    # traced, the fake kernel runs instead of decode_attention: refuse here
    refuse_untracked_gradients("cukiln::decode_attention", (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)))
    with torch._C._AutoDispatchBelowAutograd():
        return _decode_op(q, k_cache, v_cache, *arguments)


def _decode_miss(q, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start, scale, softcap,
                 num_splits, batch_invariant=False):
    """The native hot path's miss (runtime/native.py): the call as the Python kernel runs it, and its plan."""
    result, lse = _decode_kernel(q, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start,
                                 scale, softcap, num_splits, batch_invariant)
    lens = kv_lens_tensor if kv_lens_tensor is not None else kv_len
    start = kv_start_tensor if kv_start_tensor is not None else kv_start
    return (result, lse), describe_op(q, k_cache, v_cache, lens, kv_layout, start, scale, softcap, num_splits,
                                      batch_invariant, result, lse)


# CompositeExplicitAutograd: every device reaches the kernel, whose validation explains a CPU tensor.
implement("decode_attention", _decode_kernel, _decode_autograd, _decode_miss, per_call=("kv_len", "kv_start"))


@one_graph_node
def decode_attention(q, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, scale=None, softcap=None,
                     num_splits=None, out=None, return_lse=False, batch_invariant=False):
    """cukiln.decode_attention as the op cukiln::decode_attention (see there for the arguments; eager calls
    run as cukiln.torch's do); ``out=`` is not supported here."""
    if out is not None:
        raise ValueError("out: cukiln.torch.decode_attention returns a new tensor; use cukiln.decode_attention "
                         "for out=")
    if not isinstance(kv_lens, (int, torch.SymInt, torch.Tensor)) or isinstance(kv_lens, bool):  # SymInt: traced
        raise TypeError(f"kv_lens: expected an int or an int32 tensor [b], got {type(kv_lens).__name__}")
    if (_NATIVE_CALL is not None and q.is_cuda and eager(q) and type(k_cache) is torch.Tensor
            and type(v_cache) is torch.Tensor and untracked(q, k_cache, v_cache)):  # the op's plans, no dispatcher
        return _NATIVE_CALL(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, None,
                            return_lse, batch_invariant)
    if direct(q, "decode_attention"):  # decode_attention refuses what requires grad, as the op's autograd does
        return _decode_attention(q, k_cache, v_cache, kv_lens, kv_layout=kv_layout, kv_start=kv_start, scale=scale,
                                 softcap=softcap, num_splits=num_splits, return_lse=return_lse,
                                 batch_invariant=batch_invariant)
    lens_tensor = kv_lens if isinstance(kv_lens, torch.Tensor) else None
    start_tensor = kv_start if isinstance(kv_start, torch.Tensor) else None
    return specialized_call("decode_attention", (
        q, k_cache, v_cache, lens_tensor, 0 if lens_tensor is not None else kv_lens, kv_layout, start_tensor,
        0 if start_tensor is not None or kv_start is None else kv_start,
        None if scale is None else float(scale), None if softcap is None else float(softcap), num_splits,
        batch_invariant), lse=bool(return_lse))


def _variant_miss(given_out: bool, return_lse: bool):
    """The miss of a variant of cukiln.decode_attention's public call (native.variant): the op's arguments, then
    the caller's out where ``given_out``; lse computed (and allocated) only with ``return_lse``, else None."""

    def miss(*args):
        (q, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start, scale, softcap, num_splits,
         batch_invariant), out = (args[:-1], args[-1]) if given_out else (args, None)
        lens = kv_lens_tensor if kv_lens_tensor is not None else kv_len
        start = kv_start_tensor if kv_start_tensor is not None else kv_start
        result = run_decode(q, k_cache, v_cache, lens, kv_layout, start, scale, softcap, num_splits, out, return_lse,
                            batch_invariant)
        result, lse = result if return_lse else (result, None)
        return (result, lse), describe_op(q, k_cache, v_cache, lens, kv_layout, start, scale, softcap, num_splits,
                                          batch_invariant, result, lse, given=len(args) - 1 if given_out else None)

    return miss


def _native_call():
    """cukiln.decode_attention's call through the native hot path (no autograd), positional as run_decode; None
    where the native path does not serve the op."""
    callers = attention_callers("decode_attention", _variant_miss)
    if callers is None:
        return None
    call, call_no_lse, call_out, call_out_no_lse = (callers[False, True], callers[False, False], callers[True, True],
                                                    callers[True, False])

    def decode(q, k_cache, v_cache, kv_lens, kv_layout, kv_start, scale, softcap, num_splits, out, return_lse,
               batch_invariant):
        lens_tensor = kv_lens if type(kv_lens) is torch.Tensor else None
        start_tensor = kv_start if type(kv_start) is torch.Tensor else None
        args = (q, k_cache, v_cache, lens_tensor, 0 if lens_tensor is not None else kv_lens, kv_layout, start_tensor,
                0 if start_tensor is not None or kv_start is None else kv_start, scale, softcap, num_splits,
                batch_invariant)
        if out is None:
            return call(*args) if return_lse else call_no_lse(*args)[0]
        return call_out(*args, out) if return_lse else call_out_no_lse(*args, out)[0]

    return decode


_NATIVE_CALL = _native_call()
if _NATIVE_CALL is not None:
    PUBLIC_CALLS["decode_attention"] = _NATIVE_CALL
