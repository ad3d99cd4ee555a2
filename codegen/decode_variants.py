"""The decode-attention variant space: one query token per row over a fixed-capacity KV cache.

Names are ``extern "C"`` symbols and parse back into variants, e.g. ``decode_bf16_d128_s3_v8``
(attention kernel, narrow pipeline), ``decode_bf16_d128_s3_v8_wide`` (the same over 128-key tiles),
``decode_bf16_d128_s3_v16_e4m3`` (bf16 queries over FP8 e4m3 caches), ``decode_bf16_d128_s3_v8_paged`` (over a
paged pool through a block table) and
``decode_combine_bf16_d128`` (the kernel that merges split-KV partial results).
Axes are in docs/ARCHITECTURE.md. One pass versus split-KV is not an axis: it is a kernel argument (the
partial-result pointer, null for one pass), since it changes only where the epilogue writes; one kernel
for both halves the build.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Iterator

from .axes import (MAX_VECTOR_BYTES, VECTOR_WIDTHS, AxisRecord, Dtype, alternatives, first_rejection,
                   rule_general_strides_are_scalar, rule_vector_fits_16_bytes)

HEAD_DIMS = (64, 80, 96, 128, 192, 256)
DECODE_DTYPES = (Dtype.FP16, Dtype.BF16)  # fp32 accumulation inside; fp32 caches are not a decode format
KV_STRIDE_COUNTS = (3, 4)  # 3: the head dim is contiguous, strides of (batch, head, position) passed; 4: general


class Pipeline(str, enum.Enum):
    """How a block stages K/V in shared memory: keys per tile (each warp takes a quarter of a tile per
    round) and tiles in flight. Every variant has the narrow pipeline; deep and wide pay on grids of about
    one or two blocks per multiprocessor and lose on large ones (docs/performance.md), ws
    (sm_90 on) streams K/V at the rate a copy-only kernel reaches (v24-v26), ws_deep gives it a deeper ring with
    one block per multiprocessor (v36), so the tuned split table chooses per grid, and only the bandwidth path
    (16-byte copies, 3 strides, head dims up to 128; ws and ws_deep: 64 and 128) has them."""

    NARROW = "narrow"  # 64-key tiles, as many stages as 99 KB hold (three blocks per sm_90 SM at head dim 128)
    DEEP = "deep"  # 64-key tiles, as many stages as two blocks per multiprocessor leave room for
    WIDE = "wide"  # 128-key tiles, two stages (one block per multiprocessor at head dim 128)
    # sm_90 on: warp-specialized, a producer warp loading 64-key tiles by the TMA engine (tensor maps of the caches,
    # 128-byte swizzled boxes of 64 columns) into stages that the 4 computing warps release on mbarriers
    WS = "ws"
    # the same warp-specialized kernel with a deeper ring (decode_abi.WS_DEEP_RING_BYTES) and one block per
    # multiprocessor: grids of about one block per multiprocessor (one long row's splits, a few rows of long caches)
    # keep more tiles in flight
    WS_DEEP = "ws_deep"

    @property
    def tile_keys(self) -> int:
        return 128 if self is Pipeline.WIDE else 64

    @property
    def warp_specialized(self) -> bool:
        """A producer warp loads the tiles through TMA tensor maps of the caches (sm_90 on)."""
        return self in (Pipeline.WS, Pipeline.WS_DEEP)


PIPELINES = tuple(Pipeline)
# Pipelines of the paged kernels: narrow (every arch) and, for 16-bit caches, ws_deep, whose producer warps copy a
# tile's keys page by page (cp.async: no tensor map spans a block table's pages; decode_abi.PAGED_PRODUCER_WARPS)
PAGED_PIPELINES = (Pipeline.NARROW, Pipeline.WS_DEEP)
FAST_PIPELINES_MAX_HEAD_DIM = 128
WS_BOX_COLUMNS = 64  # 128 bytes of 16-bit elements: the widest box row the 128-byte swizzle takes


class Cache(str, enum.Enum):
    """What the K/V caches hold: q's own element type, or FP8 e4m3 with scales (half the bytes; each warp widens its
    keys of a staged tile to q's type, in registers or in shared memory, before the tensor cores read them, the K scale
    folded into the logit scale and the V scale into the output)."""

    SAME = "same"
    E4M3 = "e4m3"

    def itemsize(self, q_itemsize: int) -> int:
        """Bytes of a cached element, beside q's ``q_itemsize``: q's, or one (FP8)."""
        return 1 if self is Cache.E4M3 else q_itemsize


CACHES = tuple(Cache)
FP8_COPY_ELEMS = 16  # an FP8 tile's 16-byte copies
# FP8 caches on the ws pipeline: head dims whose key row is one line of the 128-byte swizzle (the TMA engine's box),
# which the consumer warps read as the rings' kernel reads its chunks (decode.cuh's Fp8Swizzled). Not ws_deep: its one
# block a multiprocessor (4 consumer warps) read FP8 caches at 0.61-0.91x the ws kernel's time on every grid of the
# bench from b = 8 (H200, benchmarks/fp8_split_sweep.py, docs/performance.md)
FP8_WS_HEAD_DIMS = (128,)


class Form(str, enum.Enum):
    """How a row's keys are found: a fixed-capacity cache (a strided slice per row), or pages of a pool through a
    block table (serving engines' caches: any power-of-two page size, a run-time argument; each key's page looked up
    as its tile is copied)."""

    FIXED = "fixed"
    PAGED = "paged"


FORMS = tuple(Form)


@dataclass(frozen=True, order=True)
class DecodeVariant(AxisRecord):
    """One compiled decode-attention kernel: each field is a compile-time axis."""

    dtype: Dtype
    head_dim: int
    strides: int  # stride count of K and V (q and out always pass all their strides: they are small)
    vec: int  # elements of one K/V row moved per access into shared memory
    pipeline: Pipeline = Pipeline.NARROW
    cache: Cache = Cache.SAME
    form: Form = Form.FIXED

    op = "decode"

    @property
    def paged(self) -> bool:
        return self.form is Form.PAGED

    @property
    def cache_itemsize(self) -> int:
        """Bytes of a cached element (Cache.itemsize)."""
        return self.cache.itemsize(self.dtype.itemsize)

    @property
    def name(self) -> str:
        suffix = "" if self.pipeline is Pipeline.NARROW else f"_{self.pipeline.value}"
        cache = "" if self.cache is Cache.SAME else f"_{self.cache.value}"
        form = "_paged" if self.paged else ""
        return f"decode_{self.dtype.value}_d{self.head_dim}_s{self.strides}_v{self.vec}{suffix}{cache}{form}"

    @property
    def module(self) -> str:
        # FP8 caches' and paged caches' kernels in modules of their own: the 16-bit fixed-capacity modules' machine
        # code (and their tuning's fingerprint) stays as it was
        return (f"decode_{self.dtype.value}" + ("" if self.cache is Cache.SAME else f"_{self.cache.value}")
                + ("_paged" if self.paged else ""))

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


@dataclass(frozen=True, order=True)
class DecodeMergeVariant(AxisRecord):
    """cukiln.merge_attention: k partial attention results over disjoint key sets (outputs in ``dtype``, natural-log
    log-sum-exps) merged into the attention over their union, one block a (row, head); the head dim is a kernel
    argument (a merge is a few bytes a head: one kernel per type serves them all)."""

    dtype: Dtype

    op = "decode_merge"

    @property
    def name(self) -> str:
        return f"decode_merge_{self.dtype.value}"

    @property
    def module(self) -> str:
        return f"decode_merge_{self.dtype.value}"


# --- pruning rules (None: valid; else the reason) ------------------------------------------------


def rule_decode_vector_divides_head_dim(v: DecodeVariant) -> str | None:
    if v.head_dim % v.vec:
        return f"vector width {v.vec} does not divide head dim {v.head_dim}"
    return None


def rule_decode_ws_whole_boxes(v: DecodeVariant) -> str | None:
    if v.pipeline.warp_specialized and v.head_dim % WS_BOX_COLUMNS:
        return (f"the {v.pipeline.value} pipeline loads whole boxes of {WS_BOX_COLUMNS} columns: head dims "
                f"{WS_BOX_COLUMNS}, 128")
    return None


def rule_decode_fast_pipelines_on_the_bandwidth_path(v: DecodeVariant) -> str | None:
    if v.pipeline is not Pipeline.NARROW and (v.strides != 3 or v.vec * v.cache_itemsize != MAX_VECTOR_BYTES
                                              or v.head_dim > FAST_PIPELINES_MAX_HEAD_DIM):
        return (f"the {v.pipeline.value} pipeline only with 3 strides, 16-byte copies and head dims up to "
                f"{FAST_PIPELINES_MAX_HEAD_DIM} (above it the deep pipeline gets no more stages than the narrow "
                f"one, and the wide one one block per multiprocessor)")
    return None


def rule_decode_fp8_on_the_bandwidth_path(v: DecodeVariant) -> str | None:
    if v.cache is Cache.E4M3 and (v.pipeline not in (Pipeline.NARROW, Pipeline.WS)
                                  or v.strides != 3 or v.vec != FP8_COPY_ELEMS):
        return (f"FP8 caches: the narrow and ws pipelines, 3 strides (a contiguous head dim) and "
                f"{FP8_COPY_ELEMS}-byte copies only")
    if v.cache is Cache.E4M3 and v.pipeline is Pipeline.WS and (v.paged or v.head_dim not in FP8_WS_HEAD_DIMS):
        return (f"FP8 caches on the ws pipeline: fixed-capacity ones of head dims {FP8_WS_HEAD_DIMS} "
                f"(a key's row one 128-byte line of the swizzle the TMA engine writes)")
    if v.cache is Cache.E4M3 and v.head_dim % 32:
        return (f"FP8 caches: head dims whose 64-key tile is a whole number of {FP8_COPY_ELEMS}-byte copies for each "
                f"of the block's 128 threads (multiples of 32), got {v.head_dim}")
    return None


def rule_decode_paged_on_the_bandwidth_path(v: DecodeVariant) -> str | None:
    # ws_deep's producer warps copy a paged pool's keys by cp.async (no tensor map spans a block table's pages): one
    # block a multiprocessor leaves registers for four of them, where ws's two blocks could feed theirs from one
    # warp each (0.41-0.93x copy on an H200, docs/performance.md); deep and wide would add variants no tuned choice
    # takes over the warp-specialized ones on sm_90
    if v.paged and (v.pipeline not in PAGED_PIPELINES or v.strides != 3 or v.vec * v.cache_itemsize != MAX_VECTOR_BYTES):
        return (f"paged caches: the {', '.join(p.value for p in PAGED_PIPELINES)} pipelines, 3 strides (a "
                f"contiguous head dim) and {MAX_VECTOR_BYTES}-byte copies only (a pool's pages are whole rows)")
    return None


def rule_decode_contiguous_rows_copy_16_bytes(v: DecodeVariant) -> str | None:
    # Every cache a serving engine or torch allocates has its rows on 16-byte boundaries (each head dim's row is a
    # multiple of 16 bytes); a view that is not (a last-dim slice at an odd offset) takes the general 4-stride kernel,
    # correct at any alignment. Kernels for 2-, 4- and 8-byte copies would serve only such views, at 0.57 of the
    # 16-bit fixed-capacity modules' compile time (benchmarks/results/build-cost-2core-2026-12-01.json).
    if v.strides == 3 and v.vec * v.cache_itemsize != MAX_VECTOR_BYTES:
        return (f"3 strides (a contiguous head dim) only with {MAX_VECTOR_BYTES}-byte copies: caches aligned otherwise "
                f"take the 4-stride kernel")
    return None


def rule_vector_fits_16_bytes_of_the_cache(v: DecodeVariant) -> str | None:
    # vec counts cache elements: q's type, or one byte each in an FP8 cache
    return rule_vector_fits_16_bytes(v) if v.cache is Cache.SAME else None


DECODE_RULES = (rule_decode_fp8_on_the_bandwidth_path, rule_decode_paged_on_the_bandwidth_path,
                rule_vector_fits_16_bytes_of_the_cache, rule_decode_contiguous_rows_copy_16_bytes,
                rule_general_strides_are_scalar, rule_decode_vector_divides_head_dim,
                rule_decode_fast_pipelines_on_the_bandwidth_path, rule_decode_ws_whole_boxes)


def decode_rejection(v: DecodeVariant) -> str | None:
    return first_rejection(DECODE_RULES, v)


def enumerate_decode() -> Iterator[DecodeVariant | DecodeCombineVariant | DecodeMergeVariant]:
    """Every valid decode variant, one combine kernel per (dtype, head dim), and a merge kernel per dtype, in a stable
    order."""
    for dtype in DECODE_DTYPES:
        for head_dim in HEAD_DIMS:
            for strides in KV_STRIDE_COUNTS:
                for vec in VECTOR_WIDTHS:
                    for pipeline in PIPELINES:
                        v = DecodeVariant(dtype, head_dim, strides, vec, pipeline)
                        if decode_rejection(v) is None:
                            yield v
            for pipeline in PIPELINES:
                fp8 = DecodeVariant(dtype, head_dim, 3, FP8_COPY_ELEMS, pipeline, Cache.E4M3)
                if decode_rejection(fp8) is None:
                    yield fp8
            for cache, vec in ((Cache.SAME, MAX_VECTOR_BYTES // dtype.itemsize), (Cache.E4M3, FP8_COPY_ELEMS)):
                for pipeline in PAGED_PIPELINES:
                    paged = DecodeVariant(dtype, head_dim, 3, vec, pipeline, cache, Form.PAGED)
                    if decode_rejection(paged) is None:
                        yield paged
            yield DecodeCombineVariant(dtype, head_dim)
    for dtype in DECODE_DTYPES:
        yield DecodeMergeVariant(dtype)


_NAME_RE = re.compile(
    rf"^decode_(?P<dtype>{alternatives(DECODE_DTYPES)})_d(?P<head_dim>\d+)_s(?P<strides>\d+)_v(?P<vec>\d+)(_(?P<pipeline>{alternatives(PIPELINES)}))?(_(?P<cache>{alternatives(CACHES[1:])}))?(?P<paged>_paged)?$"
)
_COMBINE_RE = re.compile(rf"^decode_combine_(?P<dtype>{alternatives(DECODE_DTYPES)})_d(?P<head_dim>\d+)$")
_MERGE_RE = re.compile(rf"^decode_merge_(?P<dtype>{alternatives(DECODE_DTYPES)})$")


def parse_decode_name(name: str) -> DecodeVariant | DecodeCombineVariant | DecodeMergeVariant:
    """The variant whose name is ``name``; ValueError if no valid variant has it."""
    m = _MERGE_RE.match(name)
    if m is not None:
        return DecodeMergeVariant(Dtype(m["dtype"]))
    m = _COMBINE_RE.match(name)
    if m is not None:
        v = DecodeCombineVariant(Dtype(m["dtype"]), int(m["head_dim"]))
        if v.head_dim not in HEAD_DIMS:
            raise ValueError(f"{name!r}: head dim must be one of {HEAD_DIMS}")
        return v
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"not a decode variant name: {name!r}")
    pipeline = Pipeline(m["pipeline"]) if m["pipeline"] is not None else Pipeline.NARROW
    cache = Cache(m["cache"]) if m["cache"] is not None else Cache.SAME
    form = Form.PAGED if m["paged"] else Form.FIXED
    v = DecodeVariant(Dtype(m["dtype"]), int(m["head_dim"]), int(m["strides"]), int(m["vec"]), pipeline, cache, form)
    widths = VECTOR_WIDTHS if cache is Cache.SAME else (FP8_COPY_ELEMS,)
    if v.head_dim not in HEAD_DIMS or v.strides not in KV_STRIDE_COUNTS or v.vec not in widths or v.name != name:
        raise ValueError(f"{name!r}: head dim must be one of {HEAD_DIMS}, strides one of {KV_STRIDE_COUNTS}, "
                         f"vector width one of {VECTOR_WIDTHS}, a pipeline suffix one of "
                         f"{[p.value for p in PIPELINES[1:]]} (none: narrow)")
    reason = decode_rejection(v)
    if reason is not None:
        raise ValueError(f"{name!r} names a pruned combination: {reason}")
    return v
