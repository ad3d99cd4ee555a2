"""merge_attention as a torch op: ``cukiln::merge_attention`` (returns the output and the log-sum-exp), its fake
kernel, and ``cukiln.torch.merge_attention`` (runtime/torch_support.register derives the rest from the op's schema)."""

from __future__ import annotations

from .torch_ops import register as register_ops


def _fake(outs, lses, *args):
    return outs.new_empty(outs.shape[1:]), lses.new_empty(lses.shape[1:])


def register(runtime):
    """The op's torch ops: cukiln.torch's wrapper."""
    return register_ops(runtime, fakes={"merge_attention": _fake})

