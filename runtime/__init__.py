"""cukiln: ahead-of-time compiled CUDA kernels for LLM stacks.

The kernel families' functions (``cukiln.rope``, ``cukiln.decode_attention``, ...) run the compiled kernels;
``cukiln.reference`` holds float64 implementations of the same API; ``cukiln.torch`` registers them as torch
ops; ``cukiln.context_parallel`` shards and reassembles batches for context parallelism. Importing cukiln loads
neither torch, jinja2 nor NVRTC: each name is imported on first use (cubins are loaded on first launch).
"""

from __future__ import annotations

import importlib


__version__ = "0.1.0"

_MODULES = ("reference", "torch", "context_parallel")  # submodules reachable as attributes


def _api() -> dict[str, str]:
    """Public function -> the runtime module defining it, from the generated families table (codegen/ops.py)."""
    from cukiln.generated.families import API

    return API


def __getattr__(name: str):
    # Each name is bound in the module on first use, so later lookups skip this function (host overhead).
    if name == "__all__":
        return sorted(_api()) + list(_MODULES) + ["__version__"]
    if name in _MODULES:  # importing cukiln.torch registers the ops cukiln::rope, cukiln::rope_, ...
        return importlib.import_module(f".{name}", __name__)
    module = _api().get(name)
    if module is None:
        raise AttributeError(f"module 'cukiln' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(_api()) | set(_MODULES) | {"__version__"} | {n for n in globals() if n.startswith("__")})
