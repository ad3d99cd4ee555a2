"""cukiln: ahead-of-time compiled CUDA kernels for LLM stacks.

``cukiln.rope`` and ``cukiln.decode_attention`` run the compiled kernels; ``cukiln.reference`` holds float64 implementations of the
same API. Importing cukiln loads neither jinja2 nor NVRTC; cubins are loaded on first use.
"""

from __future__ import annotations

from . import reference

__version__ = "0.1.0"
__all__ = ["rope", "decode_attention", "reference"]


def __getattr__(name: str):
    # The kernel path needs cuda.bindings; import it on first use so that `import cukiln` stays cheap.
    # Each name is bound in the module on first use, so later lookups skip this function (host overhead).
    if name == "rope":
        from .rope_api import rope

        globals()["rope"] = rope
        return rope
    if name == "torch":  # the custom ops: importing them registers cukiln::rope, cukiln::rope_, ...
        import importlib

        return importlib.import_module(".torch", __name__)
    if name == "decode_attention":
        from .decode_api import decode_attention

        globals()["decode_attention"] = decode_attention
        return decode_attention
    raise AttributeError(f"module 'cukiln' has no attribute {name!r}")
