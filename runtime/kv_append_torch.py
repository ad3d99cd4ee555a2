"""kv_append as a torch op: ``cukiln::kv_append`` (the caches declared as written), its fake kernel, and
``cukiln.torch.kv_append`` (runtime/torch_support.register derives the rest from the op's schema)."""

from __future__ import annotations

import torch

from .torch_ops import register as register_ops


def _fake(q, *args):
    return torch.empty_like(q)


def register(runtime):
    """The op's torch ops: cukiln.torch's wrapper."""
    return register_ops(runtime, fakes={"kv_append": _fake})
