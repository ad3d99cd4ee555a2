"""The cache append and the decode step as torch ops, for torch.compile and CUDA graphs: ``cukiln::kv_append``
(returns the rotated query; declared as mutating both caches) and ``cukiln::decode_step`` (returns the attention
output and its log-sum-exp; declared as mutating both caches and kv_lens, which it advances on request), with fake
kernels; ``kv_append`` and ``decode_step`` are cukiln.torch.kv_append and cukiln.torch.decode_step. Not
differentiable: a tensor that requires grad (grad mode on) is refused. kv_lens (kv_append) and kv_start take an int
or a tensor and travel as two op arguments each; decode_step's op takes kv_lens as a tensor.
"""

from __future__ import annotations

import torch

from . import decode_step_api, kv_append_api
from .decode_step_api import run_decode_step
from .kv_append_api import run_kv_append
from .specialize import call as specialized_call
from .tensors import refuse_untracked_gradients
from .torch_support import (LIBRARY, NATIVE_HANDLES, PUBLIC_CALLS, WRITTEN_ONLY_WITH, attention_callers, direct, eager,
                            fake, implement, one_graph_node, untracked)

__all__ = ["kv_append", "decode_step"]

_ANGLES = ("Tensor? positions, Tensor? freqs, Tensor? cos, Tensor? sin, Tensor? cos_sin_cache, Tensor? inv_freq, "
           "float? base, float rope_scale, float mscale, bool interleaved, int? rotary_dim, int rotary_offset, "
           "Tensor? q_norm_weight, Tensor? k_norm_weight, float norm_eps")
LIBRARY.define("kv_append(Tensor q, Tensor k_new, Tensor v_new, Tensor(a!) k_cache, Tensor(b!) v_cache, "
               "Tensor? kv_lens_tensor, SymInt kv_len, str kv_layout, Tensor? kv_start_tensor, SymInt kv_start, "
               f"{_ANGLES}) -> Tensor")
LIBRARY.define("decode_step(Tensor q, Tensor k_new, Tensor v_new, Tensor(a!) k_cache, Tensor(b!) v_cache, "
               "Tensor(c!) kv_lens, str kv_layout, Tensor? kv_start_tensor, SymInt kv_start, "
               f"{_ANGLES}, float? scale, float? softcap, int? num_splits, bool advance_lens) -> (Tensor, Tensor)")
WRITTEN_ONLY_WITH["decode_step"] = {"kv_lens": "advance_lens"}


def _kv_append_kernel(q, k_new, v_new, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start,
                      positions, freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved,
                      rotary_dim, rotary_offset, q_norm_weight, k_norm_weight, norm_eps):
    return run_kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens_tensor if kv_lens_tensor is not None else kv_len,
                         kv_layout, kv_start_tensor if kv_start_tensor is not None else kv_start, positions, None,
                         freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim,
                         rotary_offset, q_norm_weight, k_norm_weight, norm_eps, False, None)


def _decode_step_kernel(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start_tensor, kv_start, positions,
                        freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim,
                        rotary_offset, q_norm_weight, k_norm_weight, norm_eps, scale, softcap, num_splits,
                        advance_lens):
    return run_decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout,
                           kv_start_tensor if kv_start_tensor is not None else kv_start, positions, freqs, cos, sin,
                           cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset,
                           q_norm_weight, k_norm_weight, norm_eps, scale, softcap, num_splits, advance_lens, None,
                           True)




@fake("kv_append")
def _(q, *args):
    return torch.empty_like(q)


@fake("decode_step")
def _(q, *args):
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


_kv_append_op = torch.ops.cukiln.kv_append.default
_decode_step_op = torch.ops.cukiln.decode_step.default


def _refusing_gradients(name: str, op, kernel):
    """The op's autograd kernel: refuses tensors that require grad, else runs the kernel (eager) or redispatches."""
    def autograd(q, k_new, v_new, *arguments):
        refuse_untracked_gradients(f"cukiln::{name}", (("q", q), ("k_new", k_new), ("v_new", v_new)))
        if eager(q):
            return kernel(q, k_new, v_new, *arguments)
        with torch._C._AutoDispatchBelowAutograd():
            return op(q, k_new, v_new, *arguments)

    return autograd


# The native hot path's misses (runtime/native.py): the call as the Python kernel runs it, and its plan.
def _kv_append_miss(q, k_new, v_new, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start,
                    positions, freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved,
                    rotary_dim, rotary_offset, q_norm_weight, k_norm_weight, norm_eps):
    q_out = _kv_append_kernel(q, k_new, v_new, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor,
                              kv_start, positions, freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale,
                              interleaved, rotary_dim, rotary_offset, q_norm_weight, k_norm_weight, norm_eps)
    args = (q, q_out, k_new, v_new, k_cache, v_cache, kv_len if kv_lens_tensor is None else kv_lens_tensor,
            kv_start if kv_start_tensor is None else kv_start_tensor, positions, freqs, cos, sin, cos_sin_cache,
            inv_freq, None, q_norm_weight, k_norm_weight)
    return q_out, kv_append_api.describe_op(args, kv_layout=kv_layout, base=base, scale=rope_scale, mscale=mscale,
                                            interleaved=interleaved, rotary_dim=rotary_dim,
                                            rotary_offset=rotary_offset, norm_eps=norm_eps)


def _decode_step_miss(*args):
    result, lse = _decode_step_kernel(*args)
    return (result, lse), decode_step_api.describe_op(args, result, lse)


implement("kv_append", _kv_append_kernel, _refusing_gradients("kv_append", _kv_append_op, _kv_append_kernel),
          _kv_append_miss, per_call=("kv_len", "kv_start"))
implement("decode_step", _decode_step_kernel,
          _refusing_gradients("decode_step", _decode_step_op, _decode_step_kernel), _decode_step_miss)


def _split(value):
    """An int-or-tensor argument as the ops' (tensor or None, int) pair."""
    return (value, 0) if isinstance(value, torch.Tensor) else (None, 0 if value is None else value)


@one_graph_node
def kv_append(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, positions=None,
              freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, scale=1.0, mscale=1.0,
              interleaved=False, rotary_dim=None, rotary_offset=0, q_norm_weight=None, k_norm_weight=None,
              norm_eps=1e-6):
    """cukiln.kv_append as the op cukiln::kv_append (see there for the arguments): returns the rotated query, new.
    ``inplace``, ``out`` and ``kv_lens_out`` are cukiln.kv_append's only."""
    if (_NATIVE_APPEND is not None and q.is_cuda and type(kv_lens) in (int, torch.Tensor) and eager(q)
            and untracked(q, k_new, v_new)):  # the op's plans, without the dispatcher
        return _NATIVE_APPEND(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, None, freqs,
                              cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, interleaved, rotary_dim,
                              rotary_offset, q_norm_weight, k_norm_weight, norm_eps, False, None)
    args = (q, k_new, v_new, k_cache, v_cache, *_split(kv_lens), kv_layout, *_split(kv_start), positions, freqs, cos,
            sin, cos_sin_cache, inv_freq, None if base is None else float(base), float(scale), float(mscale),
            bool(interleaved), rotary_dim, rotary_offset, q_norm_weight, k_norm_weight, float(norm_eps))
    return _kv_append_kernel(*args) if direct(q, "kv_append") else specialized_call("kv_append", args)


@one_graph_node
def decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, positions=None,
                freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, rope_scale=1.0,
                mscale=1.0, interleaved=False, rotary_dim=None, rotary_offset=0, q_norm_weight=None,
                k_norm_weight=None, norm_eps=1e-6, scale=None, softcap=None, num_splits=None, advance_lens=False,
                return_lse=False):
    """cukiln.decode_step as the op cukiln::decode_step (see there for the arguments; kv_lens an int32 tensor):
    the attention output (and its log-sum-exp with ``return_lse``). ``out=`` is cukiln.decode_step's only."""
    if not isinstance(kv_lens, torch.Tensor):
        raise TypeError(f"kv_lens: cukiln.torch.decode_step takes an int32 tensor, got {type(kv_lens).__name__}")
    # the op's plans, without the dispatcher; the native caller converts the scalars as the schema types them
    if (_NATIVE_STEP is not None and not advance_lens and q.is_cuda and kv_lens.is_cuda and eager(q)
            and untracked(q, k_new, v_new)):
        start_tensor, start = _split(kv_start)
        result = _NATIVE_STEP[False, bool(return_lse)](
            q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, start_tensor, start, positions, freqs, cos, sin,
            cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset, q_norm_weight,
            k_norm_weight, norm_eps, scale, softcap, num_splits, False)
        return result if return_lse else result[0]
    args = (q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, *_split(kv_start), positions, freqs, cos, sin,
            cos_sin_cache, inv_freq, None if base is None else float(base), float(rope_scale), float(mscale),
            bool(interleaved), rotary_dim, rotary_offset, q_norm_weight, k_norm_weight, float(norm_eps),
            None if scale is None else float(scale),
            None if softcap is None else float(softcap), num_splits, bool(advance_lens))
    if direct(q, "decode_step"):
        result, lse = _decode_step_kernel(*args)
        return (result, lse) if return_lse else result
    return specialized_call("decode_step", args, lse=bool(return_lse))


def _append_variant_miss(inplace: bool, given_out: bool, lens_out: bool):
    """The miss of a variant of cukiln.kv_append's public call (native.variant): the op's arguments, then the
    caller's out where ``given_out`` and its kv_lens_out where ``lens_out``; q rotated in place with ``inplace``."""
    count = len(_kv_append_op._schema.arguments)

    def miss(*args_and_outputs):
        (q, k_new, v_new, k_cache, v_cache, kv_lens_tensor, kv_len, kv_layout, kv_start_tensor, kv_start, positions,
         freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset,
         q_norm_weight, k_norm_weight, norm_eps) = args_and_outputs[:count]
        out = args_and_outputs[count] if given_out else None
        kv_lens_out = args_and_outputs[-1] if lens_out else None
        lens = kv_lens_tensor if kv_lens_tensor is not None else kv_len
        start = kv_start_tensor if kv_start_tensor is not None else kv_start
        result = run_kv_append(q, k_new, v_new, k_cache, v_cache, lens, kv_layout, start, positions, kv_lens_out,
                               freqs, cos, sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved,
                               rotary_dim, rotary_offset, q_norm_weight, k_norm_weight, norm_eps, inplace, out)
        args = (q, result, k_new, v_new, k_cache, v_cache, lens, start, positions, freqs, cos, sin, cos_sin_cache,
                inv_freq, kv_lens_out, q_norm_weight, k_norm_weight)
        return result, kv_append_api.describe_op(
            args, inplace=inplace, out_at=count if given_out else None,
            lens_out_at=len(args_and_outputs) - 1 if lens_out else None, kv_layout=kv_layout, base=base,
            scale=rope_scale, mscale=mscale, interleaved=interleaved, rotary_dim=rotary_dim,
            rotary_offset=rotary_offset, norm_eps=norm_eps)

    return miss


def _native_append():
    """cukiln.kv_append's call through the native hot path (no autograd), positional as run_kv_append; None where
    the native path does not serve the op."""
    from . import native

    handle = NATIVE_HANDLES.get("kv_append")
    if handle is None:
        return None
    # by (inplace, out given, kv_lens_out given): the op itself, or a variant taking the caller's tensors
    calls = {(False, False, False): native.caller(handle)}
    for inplace, given_out, lens_out in ((False, False, True), (False, True, False), (False, True, True),
                                         (True, False, False), (True, False, True)):
        suffix = "#inplace" * inplace + "#out" * given_out + "#lens_out" * lens_out
        calls[inplace, given_out, lens_out] = native.variant(
            handle, suffix, _append_variant_miss(inplace, given_out, lens_out), given_out + lens_out)

    def append(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, kv_lens_out, freqs, cos,
               sin, cos_sin_cache, inv_freq, base, scale, mscale, interleaved, rotary_dim, rotary_offset,
               q_norm_weight, k_norm_weight, norm_eps, inplace, out):
        lens_tensor, lens = _split(kv_lens)
        start_tensor, start = _split(kv_start)
        call = calls[inplace, out is not None, kv_lens_out is not None]
        outputs = (() if out is None else (out,)) + (() if kv_lens_out is None else (kv_lens_out,))
        return call(q, k_new, v_new, k_cache, v_cache, lens_tensor, lens, kv_layout, start_tensor, start, positions,
                    freqs, cos, sin, cos_sin_cache, inv_freq, base, scale, mscale, interleaved, rotary_dim,
                    rotary_offset, q_norm_weight, k_norm_weight, norm_eps, *outputs)

    return append


_NATIVE_APPEND = _native_append()
if _NATIVE_APPEND is not None:
    PUBLIC_CALLS["kv_append"] = _NATIVE_APPEND


def _step_variant_miss(given_out: bool, return_lse: bool):
    """The miss of a variant of cukiln.decode_step's public call (native.attention_callers): the op's arguments,
    then the caller's out where ``given_out``; lse computed (and allocated) only with ``return_lse``, else None."""

    def miss(*args_and_out):
        args, out = (args_and_out[:-1], args_and_out[-1]) if given_out else (args_and_out, None)
        (q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start_tensor, kv_start, *rest) = args
        result = run_decode_step(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout,
                                 kv_start_tensor if kv_start_tensor is not None else kv_start, *rest, out, return_lse)
        result, lse = result if return_lse else (result, None)
        return (result, lse), decode_step_api.describe_op(tuple(args), result, lse,
                                                          given=len(args) if given_out else None)

    return miss


def _native_step():
    """cukiln.decode_step's calls through the native hot path (lengths on the device, kv_lens not advanced, no
    autograd) by (out given, lse asked for): builtin functions of the op's arguments (advance_lens False), then the
    caller's out where given; None where the native path does not serve the op. The public functions call them
    straight, with no Python frame between (the step's eager host time is at its target's edge)."""
    return attention_callers("decode_step", _step_variant_miss)


_NATIVE_STEP = _native_step()
if _NATIVE_STEP is not None:
    PUBLIC_CALLS["decode_step"] = _NATIVE_STEP
