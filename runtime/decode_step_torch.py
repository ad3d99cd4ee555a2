"""The decode step as a torch op: ``cukiln::decode_step`` (the caches, and kv_lens where advance_lens says so, declared
as written; returns the output and the log-sum-exp), its fake kernel, and ``cukiln.torch.decode_step``
(runtime/torch_support.register derives the rest from the op's schema)."""

from __future__ import annotations

import torch

from .torch_ops import register as register_ops


def _fake(q, *args):
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


def register(runtime):
    """The op's torch ops: cukiln.torch's wrapper."""
    return register_ops(runtime, fakes={"decode_step": _fake})
