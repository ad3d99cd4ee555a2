"""Decode attention as a torch op: ``cukiln::decode_attention`` (returns the output and the log-sum-exp), its fake
kernel, and ``cukiln.torch.decode_attention`` (runtime/torch_support.register derives the rest from the op's
schema). Not differentiable: given a tensor that requires grad (grad mode on), it raises rather than return a result
autograd would treat as a constant."""

from __future__ import annotations

import torch

from .torch_ops import register as register_ops


def _fake(q, *args):
    b, d = q.shape[0], q.shape[-1]
    heads = q.numel() // max(b * d, 1)
    return q.new_empty((b, heads, d)).view(q.shape), q.new_empty((b, heads), dtype=torch.float32)


def register(runtime):
    """The op's torch ops: cukiln.torch's wrapper."""
    return register_ops(runtime, fakes={"decode_attention": _fake})
