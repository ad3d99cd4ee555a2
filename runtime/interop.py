"""Arrays of other frameworks and explicit streams for ``cukiln.rope`` and ``cukiln.decode_attention``.

The kernels run on torch tensors; an array that exposes ``__dlpack__`` (CuPy, JAX, ...) or
``__cuda_array_interface__`` is viewed as one without a copy, the call runs, and each output comes back
in the framework of the call's first array (x, or q). ``stream=`` picks the CUDA stream: an int handle,
a torch or CuPy stream, or any object with ``__cuda_stream__``; by default CuPy's current stream for CuPy
arrays, else torch's current stream. The call then runs with that stream made torch's current one, so the
outputs are allocated for it too. JAX arrays are immutable: in place and ``out=`` are refused for them.

A call whose first array is a torch tensor and that names no stream goes straight through: the entry points
(runtime/binder.py) test the stream and look the first argument's type up in TORCH_TYPES.known, inline.
"""

from __future__ import annotations


def framework(obj) -> str | None:
    """'torch', 'cupy', 'jax', 'dlpack' or 'cai' for an array, None for anything else (ints, None, ...)."""
    root = type(obj).__module__.partition(".")[0]
    if root == "torch" and hasattr(obj, "data_ptr"):
        return "torch"
    if root == "cupy" and hasattr(obj, "__cuda_array_interface__"):
        return "cupy"
    if root in ("jax", "jaxlib") and hasattr(obj, "__dlpack__"):
        return "jax"
    if hasattr(obj, "__dlpack__"):
        return "dlpack"
    if hasattr(obj, "__cuda_array_interface__"):
        return "cai"
    return None


def stream_handle(stream) -> int:
    """The CUDA stream handle that ``stream`` names (TypeError when it names none)."""
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])  # (version, handle)
    raise TypeError(f"stream: expected a CUDA stream handle (int), a torch or CuPy stream, or an object with "
                    f"__cuda_stream__; got {type(stream).__name__}")


def as_torch(obj, name: str):
    """``obj`` as a torch tensor viewing the same memory (arrays), or ``obj`` itself (anything else)."""
    kind = framework(obj)
    if kind in (None, "torch"):
        return obj
    import torch

    if kind == "cai":  # no __dlpack__: torch finds the device from the pointer (naming one copies to it)
        tensor = torch.as_tensor(obj)
        pointer = obj.__cuda_array_interface__["data"][0]
        if tensor.numel() and tensor.data_ptr() != pointer:
            raise TypeError(f"{name}: torch could not view the {type(obj).__name__}'s memory in place (it made a "
                            f"copy), so cukiln's results would not reach it")
        return tensor
    try:
        return torch.from_dlpack(obj)
    except Exception as e:  # e.g. a host array, or a dtype torch lacks
        raise TypeError(f"{name}: could not view the {type(obj).__module__}.{type(obj).__name__} as a CUDA tensor "
                        f"without a copy: {e}") from None


def to_framework(tensor, kind: str):
    """A torch result handed back as an array of ``kind`` (same memory)."""
    if kind == "cupy":
        import cupy

        return cupy.from_dlpack(tensor)
    if kind == "jax":
        import jax.dlpack

        return jax.dlpack.from_dlpack(tensor)
    return tensor  # torch, or a framework cukiln does not know: torch tensors speak DLPack themselves


def default_stream(kind: str) -> int | None:
    """CuPy's current stream for CuPy arrays; None (torch's current stream) otherwise."""
    if kind == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return None


class _TensorTypes:
    """The types framework() found to be torch tensors, remembered: the fast path's one check is a set lookup."""

    def __init__(self) -> None:
        self.known: set[type] = set()  # never rebound: the entry points hold this set

    def is_torch(self, obj) -> bool:
        if type(obj) in self.known:
            return True
        if framework(obj) == "torch":
            self.known.add(type(obj))
            return True
        return False


TORCH_TYPES = _TensorTypes()


def call_with_foreign_arrays(fn, arguments: dict):
    """``fn(**arguments)`` as the module docstring says: every argument that is an array is viewed as a torch
    tensor, anything else passes unchanged; the call runs on ``arguments["stream"]`` (or the framework's
    default stream); each result comes back in the framework of ``fn``'s first argument."""
    import torch

    names = list(arguments)
    first_name, stream = names[0], arguments["stream"]
    first = arguments[first_name]
    kind = framework(first)
    if kind is None:  # not an array at all: the TypeError that names the argument
        from .tensors import from_torch

        from_torch(first, first_name)
    if kind == "jax" and (arguments.get("inplace") or arguments.get("out") is not None):
        raise TypeError("inplace/out: JAX arrays are immutable; call without them and use the result")
    converted = {name: as_torch(value, name) for name, value in arguments.items() if name != "stream"}
    first_t = converted[first_name]
    handle = stream_handle(stream) if stream is not None else default_stream(kind)

    def call():
        # the results handed over on the call's stream: DLPack orders the receiving framework's stream after the
        # producer's current one, which is then the stream the kernels ran on
        result = fn(**converted)
        return tuple(to_framework(r, kind) for r in result) if isinstance(result, tuple) else to_framework(result, kind)

    if handle is None:
        return call()
    with torch.cuda.device(first_t.device), torch.cuda.stream(torch.cuda.ExternalStream(handle, device=first_t.device)):
        return call()
