"""Framework-agnostic tensor metadata: what a kernel launch needs to know about an array."""

from __future__ import annotations

import functools
from dataclasses import dataclass

ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "int32": 4, "int64": 8, "e4m3": 1}
TORCH_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int32": "int32", "int64": "int64",
               "e4m3": "float8_e4m3fn"}
FLOATS, HALVES, INTS = ("fp32", "fp16", "bf16"), ("fp16", "bf16"), ("int32", "int64")
# What a KV cache may hold: q's dtype, or FP8 (e4m3, with scales) for half the bytes
CACHES = HALVES + ("e4m3",)
E4M3_MAX = 448.0  # the largest finite e4m3 value: quantizing saturates to it


def dtype_list(names) -> str:
    """"float32, float16 or bfloat16" for ("fp32", "fp16", "bf16"): what an argument accepts, in messages."""
    words = [TORCH_NAMES[n] for n in names]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


@dataclass(frozen=True)
class TensorInfo:
    """A device array: pointer, shape and strides in elements, dtype name, device ordinal."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    device: int

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def byte_span(self) -> tuple[int, int]:
        """[first, last + 1) bytes that the array can touch (empty arrays touch none)."""
        if self.numel == 0:
            return (self.ptr, self.ptr)
        reach = sum((n - 1) * abs(s) for n, s in zip(self.shape, self.strides))
        low = self.ptr + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0) * self.itemsize
        return (low, low + (reach + 1) * self.itemsize)

    def overlaps(self, other: "TensorInfo") -> bool:
        """True when the two may share a byte: their byte spans meet, unless they interleave without touching (two
        column slices of one buffer's rows, as q and k of a fused qkv projection: see interleaving)."""
        if self.device != other.device:
            return False
        a0, a1 = self.byte_span()
        b0, b1 = other.byte_span()
        if not (a0 < b1 and b0 < a1):
            return False
        window = interleaving(self, other)
        return window is None or not window.apart(other.ptr - self.ptr)

    def same_view(self, other: "TensorInfo") -> bool:
        """The same elements of the same type (a view of other memory as another dtype is not)."""
        return (self.ptr == other.ptr and self.shape == other.shape and self.strides == other.strides
                and self.dtype == other.dtype)

    def has_internal_overlap(self) -> bool:
        """True when two indices can reach one element (a broadcast, stride-0 dimension)."""
        return any(n > 1 and s == 0 for n, s in zip(self.shape, self.strides))


@dataclass(frozen=True)
class Interleaving:
    """Two tensors whose rows step by the same strides, each one's row within the smallest of them: they share no
    byte whenever the distance between their pointers, modulo that stride, lies in [lo, hi]."""

    modulus: int
    lo: int
    hi: int

    def apart(self, distance: int) -> bool:
        return self.lo <= distance % self.modulus <= self.hi


def interleaving(a: TensorInfo, b: TensorInfo) -> Interleaving | None:
    """The Interleaving of a and b (in bytes), or None when their outermost dimensions differ in size or stride.

    Their elements are a.ptr + (shared indices) . strides + r_a and b.ptr + (shared) . strides + r_b, r_a and r_b
    within each one's own extent E over its other dimensions. With every shared stride a multiple of the
    smallest, M, and E_a, E_b <= M, they can meet only where r_a - r_b = distance modulo M: never when the
    distance modulo M lies in [E_a, M - E_b]."""
    a_dims = sorted(((n, s * a.itemsize) for n, s in zip(a.shape, a.strides) if n > 1), key=lambda d: -abs(d[1]))
    b_dims = sorted(((n, s * b.itemsize) for n, s in zip(b.shape, b.strides) if n > 1), key=lambda d: -abs(d[1]))
    shared = []  # the outermost dimensions, as long as both have them alike
    for da, db in zip(a_dims, b_dims):
        if da != db or da[1] <= 0:
            break
        shared.append(da)
    # the rows: the shortest run of shared outer dimensions that leaves each tensor's rest within the innermost
    # of them, with room for both
    for count in range(1, len(shared) + 1):
        outer = shared[:count]
        modulus = outer[-1][1]
        if any(st % modulus for _, st in outer):
            return None
        ea = sum((n - 1) * abs(st) for n, st in a_dims[count:]) + a.itemsize
        eb = sum((n - 1) * abs(st) for n, st in b_dims[count:]) + b.itemsize
        if ea <= modulus - eb:
            return Interleaving(modulus, ea, modulus - eb)
    return None


@functools.lru_cache(maxsize=1)
def _torch_dtypes() -> dict:
    import torch

    return {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
            torch.int32: "int32", torch.int64: "int64", torch.float8_e4m3fn: "e4m3"}


def describe(value) -> str:
    """A short description of a given value for error messages."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__} of shape {tuple(shape)}, dtype {getattr(value, 'dtype', '?')}"
    return f"{type(value).__name__} {value!r}"


def refuse_untracked_gradients(function: str, named_tensors, differentiable: str | None = None) -> None:
    """With grad mode on, raise for the first (name, tensor) that requires grad: autograd does not see
    ``function``, so it would treat the result as a constant (a gradient silently dropped) or miss a write.
    ``differentiable`` names the form of the call that autograd does see, in x."""
    import torch

    for name, t in named_tensors:  # requires_grad first: rarely true, and cheaper than the grad-mode query
        if getattr(t, "requires_grad", False) and torch.is_grad_enabled():
            instead = f"use {differentiable}, which is differentiable in x, or " if differentiable else ""
            raise RuntimeError(f"{name} requires grad, but autograd does not see {function} (the gradient through "
                               f"it would be lost): {instead}pass a detached tensor or run under torch.no_grad()")


def device_name(device: int) -> str:
    """How messages name a TensorInfo's device: cuda:N, or the CPU (-1: the float64 reference takes CPU tensors)."""
    return "the CPU" if device < 0 else f"cuda:{device}"


def from_torch(t, name: str, accepts=tuple(ITEMSIZE), *, cuda: bool = True) -> TensorInfo:
    """TensorInfo of a torch tensor; TypeError for non-tensors and for dtypes outside ``accepts`` (the dtype
    names this argument takes, which the message lists), ValueError off-GPU."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {describe(t)}")
    if t.is_neg():  # a lazily negated view: its memory holds the values' negatives, which a kernel would read
        raise ValueError(f"{name}: a negated view (the imaginary part of a conjugated complex tensor is one); "
                         "call .resolve_neg() on it first")
    dtype = _torch_dtypes().get(t.dtype)
    if dtype not in accepts:
        raise TypeError(f"{name}: expected {dtype_list(accepts)}, got {str(t.dtype).replace('torch.', '')}")
    device = t.device
    if cuda and device.type != "cuda":
        raise ValueError(f"{name}: expected a CUDA tensor, got one on {device}")
    return TensorInfo(t.data_ptr(), tuple(t.shape), tuple(t.stride()), dtype,
                      device.index if device.type == "cuda" else -1)
