"""cukiln: ahead-of-time compiled CUDA kernels for LLM stacks.

``cukiln.rope`` runs the compiled kernels; ``cukiln.reference`` holds float64 implementations of the
same API. Importing cukiln loads neither jinja2 nor NVRTC; cubins are loaded on first use.
"""

from __future__ import annotations

from . import reference

__version__ = "0.1.0"
__all__ = ["rope", "reference"]


def __getattr__(name: str):
    # The kernel path needs cuda.bindings; import it on first use so that `import cukiln` stays cheap.
    if name == "rope":
        from .rope_api import rope

        return rope
    raise AttributeError(f"module 'cukiln' has no attribute {name!r}")
