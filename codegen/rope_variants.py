"""The RoPE variant space: every compile-time choice, the rules that prune it, and stable names.

A variant's name is also its ``extern "C"`` symbol, and it parses back into the variant, e.g.
``rope_bf16_dense_half_freqs_s3_v8``. The axes are described in docs/ARCHITECTURE.md. The direction
(forward or backward) is not an axis: it is a kernel argument, since backward is the forward rotation
with each pair's sines swapped and negated, and one kernel for both halves the build.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from typing import Iterator

from .axes import (MAX_VECTOR_BYTES, VECTOR_WIDTHS, AxisRecord, Dtype, alternatives, first_rejection,
                   rule_general_strides_are_scalar, rule_vector_fits_16_bytes)


class Layout(str, enum.Enum):
    # sbhd, bshd and any permuted view of them: the sequence and batch axes are found through strides.
    DENSE = "dense"
    # packed sequences [tokens, heads, head_dim] delimited by cu_seqlens
    THD = "thd"


class Dispatch(str, enum.Enum):
    """How packed (thd) tokens are laid over the grid; dense layouts have one way only."""

    NONE = "none"  # dense layouts
    GRID = "grid"  # blocks over (longest sequence, sequences); blocks past a sequence's end exit
    TOKEN = "token"  # blocks over packed tokens; the owning sequence found by a search per block


class Pairing(str, enum.Enum):
    HALF = "half"  # element i rotates with i + rotary_dim/2
    INTERLEAVED = "interleaved"  # element 2i rotates with 2i + 1


class Angles(str, enum.Enum):
    FREQS = "freqs"  # fp32 angle table [max_pos, rotary_dim]
    COS_SIN = "cossin"  # cos/sin caches in the element type of x
    COS_SIN_F32 = "cossinf32"  # cos/sin caches in fp32 for an fp16/bf16 x
    INV_FREQ = "invfreq"  # fp32 [rotary_dim/2]; angle = position * scale * inv_freq[i]
    BASE = "base"  # angle = position * scale * base ** (-2i / rotary_dim), computed in the kernel
    # any source above, picked at run time by the params' angle_kind (its index in SOURCES): one kernel for the five
    # where the per-source kernels cost the build more than they save at run time (kv_append, decode_step, and
    # RoPE's kernels narrower than 16 bytes)
    ANY = "any"


# The angle sources a call gives, in the order of angle_kind's values (Angles.ANY's switch)
SOURCES = (Angles.FREQS, Angles.COS_SIN, Angles.COS_SIN_F32, Angles.INV_FREQ, Angles.BASE)


STRIDE_COUNTS = (0, 3, 4)


@dataclass(frozen=True, order=True)
class RopeVariant(AxisRecord):
    """One compiled RoPE kernel: each field is a compile-time axis."""

    dtype: Dtype
    layout: Layout
    pairing: Pairing
    angles: Angles
    strides: int  # 0: packed rows, addresses from the shape; 3: last dim contiguous; 4: fully general
    vec: int  # elements per load/store
    dispatch: Dispatch = Dispatch.NONE
    tensors: int = 1  # 2: a second tensor of the same tokens (rope_qk's k) rotated in the same launch
    # M-RoPE (Qwen2-VL and later): three positions a token (time, height, width), each owning a section of the
    # rotary pairs
    mrope: bool = False

    op = "rope"

    @property
    def name(self) -> str:
        suffix = "" if self.dispatch is Dispatch.NONE else f"_{self.dispatch.value}"
        pair = "_qk" if self.tensors == 2 else ""
        sections = "_mrope" if self.mrope else ""
        return (
            f"rope_{self.dtype.value}_{self.layout.value}_{self.pairing.value}"
            f"_{self.angles.value}_s{self.strides}_v{self.vec}{suffix}{pair}{sections}"
        )

    @property
    def module(self) -> str:
        """All variants of one (op, dtype, layout, dispatch, sectioned positions) share a translation unit: NVRTC
        then runs once per module and arch, and modules stay small enough to compile in parallel."""
        base = f"{self.op}_{self.dtype.value}"
        if self.layout is not Layout.DENSE:
            return f"{base}_{self.layout.value}_{self.dispatch.value}"
        return f"{base}_mrope" if self.mrope else base

    @property
    def sixteen_bytes(self) -> bool:
        """Whether it moves 16 bytes an access (the widest: MAX_VECTOR_BYTES)."""
        return self.vec * self.dtype.itemsize == MAX_VECTOR_BYTES


# --- pruning rules -------------------------------------------------------------------------------
# Each rule returns None when the combination is valid, else the reason it is not. They are kept
# separate so that tests can name the rule that removes a combination.


def rule_f32_cache_only_for_half_types(v: RopeVariant) -> str | None:
    if v.angles is Angles.COS_SIN_F32 and v.dtype is Dtype.FP32:
        return "an fp32 x already uses fp32 cos/sin caches (angles=cossin)"
    return None


def rule_source_at_run_time_below_16_bytes(v: RopeVariant) -> str | None:
    # RoPE's 16-byte kernels already take the registers their launch bound allows: one of every source spilled there
    # (M-RoPE's too, at 2 blocks of 256 threads), so they keep a kernel per source. Narrower accesses take their
    # source at run time (angles=any): a quarter of their compile time, with no spill
    # (benchmarks/results/angle-merge-cost-2core-2026-12-02-narrow-widths.json).
    if v.sixteen_bytes and v.angles is Angles.ANY:
        return "RoPE's 16-byte kernels take one angle source each (angles=any spills there)"
    if not v.sixteen_bytes and v.angles is not Angles.ANY:
        return "RoPE's kernels narrower than 16 bytes take their angle source at run time (angles=any)"
    return None


def sources_served(v: RopeVariant) -> tuple[Angles, ...]:
    """The angle sources a call may give that ``v``'s kernel serves: its own, or every source valid for its element
    type where it takes its source at run time (angles=any)."""
    if v.angles is not Angles.ANY:
        return (v.angles,)
    return tuple(a for a in SOURCES if rule_f32_cache_only_for_half_types(dataclasses.replace(v, angles=a)) is None)


def rule_dispatch_only_for_thd(v: RopeVariant) -> str | None:
    if (v.layout is Layout.THD) != (v.dispatch is not Dispatch.NONE):
        return "layout thd takes dispatch grid or token; dense layouts take none"
    return None


def rule_two_tensors_for_dense_rows(v: RopeVariant) -> str | None:
    # rope_qk's q and k in one launch: the dense layouts (serving's [t, h, d] slices with positions are one) with
    # packed or 3-stride rows; packed sequences (thd) and strided last dims take two launches of one tensor.
    if v.tensors == 2 and (v.layout is not Layout.DENSE or v.strides not in (0, 3)):
        return "two tensors (rope_qk in one launch) only for dense layouts with 0 or 3 strides"
    return None


def rule_mrope_for_dense_rows(v: RopeVariant) -> str | None:
    # M-RoPE takes explicit positions [3, b, s] (or [3, t]), which the dense kernels read (thd with positions is
    # planned as a dense [t, 1] tensor); packed sequences by cu_seqlens derive positions from the offsets.
    if v.mrope and v.layout is not Layout.DENSE:
        return "M-RoPE (three positions a token) only for dense layouts, which explicit positions take"
    return None


RULES = (rule_vector_fits_16_bytes, rule_general_strides_are_scalar, rule_f32_cache_only_for_half_types,
         rule_source_at_run_time_below_16_bytes, rule_dispatch_only_for_thd, rule_two_tensors_for_dense_rows,
         rule_mrope_for_dense_rows)
TENSOR_COUNTS = (1, 2)


def rejection(v: RopeVariant) -> str | None:
    """The first rule that rejects ``v``, or None if it is a valid variant."""
    return first_rejection(RULES, v)


def enumerate_rope() -> Iterator[RopeVariant]:
    """Every valid RoPE variant, in a stable order."""
    for dtype in Dtype:
        for layout in Layout:
            for pairing in Pairing:
                for angles in Angles:
                    for strides in STRIDE_COUNTS:
                        for vec in VECTOR_WIDTHS:
                            for dispatch in Dispatch:
                                for tensors in TENSOR_COUNTS:
                                    for mrope in (False, True):
                                        v = RopeVariant(dtype, layout, pairing, angles, strides, vec, dispatch,
                                                        tensors, mrope)
                                        if rejection(v) is None:
                                            yield v


_NAME_RE = re.compile(
    rf"^rope_(?P<dtype>{alternatives(Dtype)})"
    rf"_(?P<layout>{alternatives(Layout)})_(?P<pairing>{alternatives(Pairing)})"
    rf"_(?P<angles>{alternatives(Angles)})_s(?P<strides>\d+)_v(?P<vec>\d+)"
    rf"(?:_(?P<dispatch>{Dispatch.GRID.value}|{Dispatch.TOKEN.value}))?(?P<qk>_qk)?(?P<mrope>_mrope)?$"
)


def parse_rope_name(name: str) -> RopeVariant:
    """The variant whose name is ``name``; ValueError if no valid variant has it."""
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"not a RoPE variant name: {name!r}")
    v = RopeVariant(
        Dtype(m["dtype"]),
        Layout(m["layout"]),
        Pairing(m["pairing"]),
        Angles(m["angles"]),
        int(m["strides"]),
        int(m["vec"]),
        Dispatch(m["dispatch"] or Dispatch.NONE.value),
        2 if m["qk"] else 1,
        m["mrope"] is not None,
    )
    if v.strides not in STRIDE_COUNTS or v.vec not in VECTOR_WIDTHS:
        raise ValueError(f"{name!r}: strides must be one of {STRIDE_COUNTS}, vector width one of {VECTOR_WIDTHS}")
    reason = rejection(v)
    if reason is not None:
        raise ValueError(f"{name!r} names a pruned combination: {reason}")
    return v
