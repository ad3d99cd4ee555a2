"""The decode-attention variant space: one query token per row over a fixed-capacity KV cache.

Names are ``extern "C"`` symbols and parse back into variants, e.g. ``decode_bf16_d128_s3_v8``
(attention kernel, 64-key tiles), ``decode_bf16_d128_s3_v8_k128`` (the same over 128-key tiles) and
``decode_combine_bf16_d128`` (the kernel that merges split-KV partial results).
Axes are in DESIGN.md section 3. One pass versus split-KV is not an axis: it is a kernel argument (the
partial-result pointer, null for one pass), since it changes only where the epilogue writes; one kernel
for both halves the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from .variants import MAX_VECTOR_BYTES, VECTOR_WIDTHS, AxisRecord, Dtype, first_rejection

HEAD_DIMS = (64, 80, 96, 128, 192, 256)
DECODE_DTYPES = (Dtype.FP16, Dtype.BF16)  # fp32 accumulation inside; fp32 caches are not a decode format
KV_STRIDE_COUNTS = (3, 4)  # 3: the head dim is contiguous, strides of (batch, head, position) passed; 4: general
# Keys of one K/V tile (a pipeline stage; each of the block's warps takes a quarter of them per round).
# 64 is every variant's; 128 halves the rounds a block walks and doubles the bytes each stage has in
# flight, at one block per multiprocessor (143 KB of shared memory at head dim 128): it pays where a grid
# has about one block per multiprocessor (benchmarks/NOTES.md, decode v16/v17), so the tuned split table
# chooses it per grid, and only the bandwidth path (16-byte copies, 3 strides, head dim <= 128) has it.
TILE_KEYS = (64, 128)
NARROW_TILE = 64
WIDE_TILE_MAX_HEAD_DIM = 128


@dataclass(frozen=True, order=True)
class DecodeVariant(AxisRecord):
    """One compiled decode-attention kernel: each field is a compile-time axis."""

    dtype: Dtype
    head_dim: int
    strides: int  # stride count of K and V (q and out always pass all their strides: they are small)
    vec: int  # elements of one K/V row moved per access into shared memory
    tile: int = NARROW_TILE  # keys per K/V tile

    op = "decode"

    @property
    def name(self) -> str:
        suffix = "" if self.tile == NARROW_TILE else f"_k{self.tile}"
        return f"decode_{self.dtype.value}_d{self.head_dim}_s{self.strides}_v{self.vec}{suffix}"

    @property
    def module(self) -> str:
        return f"decode_{self.dtype.value}"

    @property
    def combine(self) -> "DecodeCombineVariant":
        """The kernel that merges this variant's split-KV partial results."""
        return DecodeCombineVariant(self.dtype, self.head_dim)


@dataclass(frozen=True, order=True)
class DecodeCombineVariant(AxisRecord):
    """Merges the per-split (output, log-sum-exp) pairs of one (row, query head) into the final output."""

    dtype: Dtype
    head_dim: int

    op = "decode_combine"

    @property
    def name(self) -> str:
        return f"decode_combine_{self.dtype.value}_d{self.head_dim}"

    @property
    def module(self) -> str:
        return f"decode_{self.dtype.value}"


# --- pruning rules (None: valid; else the reason) ------------------------------------------------


def rule_decode_vector_fits_16_bytes(v: DecodeVariant) -> str | None:
    if v.vec * v.dtype.itemsize > MAX_VECTOR_BYTES:
        return f"vector of {v.vec} x {v.dtype.itemsize} bytes exceeds {MAX_VECTOR_BYTES} bytes"
    return None


def rule_decode_general_strides_are_scalar(v: DecodeVariant) -> str | None:
    if v.strides == 4 and v.vec != 1:
        return "4 strides (strided head dim) only with vector width 1"
    return None


def rule_decode_vector_divides_head_dim(v: DecodeVariant) -> str | None:
    if v.head_dim % v.vec:
        return f"vector width {v.vec} does not divide head dim {v.head_dim}"
    return None


def rule_decode_wide_tile_on_the_bandwidth_path(v: DecodeVariant) -> str | None:
    if v.tile != NARROW_TILE and (v.strides != 3 or v.vec * v.dtype.itemsize != MAX_VECTOR_BYTES
                                  or v.head_dim > WIDE_TILE_MAX_HEAD_DIM):
        return (f"{v.tile}-key tiles only with 3 strides, 16-byte copies and head dims up to "
                f"{WIDE_TILE_MAX_HEAD_DIM} (one block per multiprocessor already at head dim {WIDE_TILE_MAX_HEAD_DIM})")
    return None


DECODE_RULES = (rule_decode_vector_fits_16_bytes, rule_decode_general_strides_are_scalar,
                rule_decode_vector_divides_head_dim, rule_decode_wide_tile_on_the_bandwidth_path)


def decode_rejection(v: DecodeVariant) -> str | None:
    return first_rejection(DECODE_RULES, v)


def enumerate_decode() -> Iterator[DecodeVariant | DecodeCombineVariant]:
    """Every valid decode variant, and one combine kernel per (dtype, head dim), in a stable order."""
    for dtype in DECODE_DTYPES:
        for head_dim in HEAD_DIMS:
            for strides in KV_STRIDE_COUNTS:
                for vec in VECTOR_WIDTHS:
                    for tile in TILE_KEYS:
                        v = DecodeVariant(dtype, head_dim, strides, vec, tile)
                        if decode_rejection(v) is None:
                            yield v
            yield DecodeCombineVariant(dtype, head_dim)


def _alternatives(values) -> str:
    return "|".join(re.escape(str(getattr(m, "value", m))) for m in values)


_NAME_RE = re.compile(
    rf"^decode_(?P<dtype>{_alternatives(DECODE_DTYPES)})_d(?P<head_dim>\d+)_s(?P<strides>\d+)_v(?P<vec>\d+)(_k(?P<tile>\d+))?$"
)
_COMBINE_RE = re.compile(rf"^decode_combine_(?P<dtype>{_alternatives(DECODE_DTYPES)})_d(?P<head_dim>\d+)$")


def parse_decode_name(name: str) -> DecodeVariant | DecodeCombineVariant:
    """The variant whose name is ``name``; ValueError if no valid variant has it."""
    m = _COMBINE_RE.match(name)
    if m is not None:
        v = DecodeCombineVariant(Dtype(m["dtype"]), int(m["head_dim"]))
        if v.head_dim not in HEAD_DIMS:
            raise ValueError(f"{name!r}: head dim must be one of {HEAD_DIMS}")
        return v
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"not a decode variant name: {name!r}")
    tile = int(m["tile"]) if m["tile"] is not None else NARROW_TILE
    v = DecodeVariant(Dtype(m["dtype"]), int(m["head_dim"]), int(m["strides"]), int(m["vec"]), tile)
    if (v.head_dim not in HEAD_DIMS or v.strides not in KV_STRIDE_COUNTS or v.vec not in VECTOR_WIDTHS
            or v.tile not in TILE_KEYS or v.name != name):
        raise ValueError(f"{name!r}: head dim must be one of {HEAD_DIMS}, strides one of {KV_STRIDE_COUNTS}, "
                         f"vector width one of {VECTOR_WIDTHS}, tile keys one of {TILE_KEYS} (named only "
                         f"when not {NARROW_TILE})")
    reason = decode_rejection(v)
    if reason is not None:
        raise ValueError(f"{name!r} names a pruned combination: {reason}")
    return v
