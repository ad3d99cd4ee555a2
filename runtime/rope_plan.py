"""RoPE call planning: validate the arguments, pick a variant, fill its parameters, shape the launch.

Works on TensorInfo metadata alone (no framework, no GPU), so every rule here is tested on the CPU.
Every bad input raises ValueError or TypeError naming the argument, the expectation and the given
value, before anything is launched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from cukiln.core.archs import programmatic_launch, tuned
from cukiln.generated import dispatch

from .tensors import TensorInfo, device_name

FLOAT_DTYPES = ("fp32", "fp16", "bf16")
INT_DTYPES = ("int32", "int64")
DENSE_LAYOUTS = ("sbhd", "bshd")
LAYOUTS = DENSE_LAYOUTS + ("thd",)
THD_DISPATCH_MODES = ("auto", "token", "grid")
GRID_Y_MAX = 65535  # CUDA's limit on gridDim.y: grid dispatch puts the sequences there
INT32_MAX = 2**31 - 1
# The kernels' token loops step an int index by the grid's width (about the token count) past the last
# token: twice the tokens, plus a block's rows (at most 1024), must fit in an int.
MAX_TOKENS = (INT32_MAX - 1024) // 2


@dataclass(frozen=True)
class RopePlan:
    key: tuple  # (dtype, layout, pairing, angles, strides, vector width, dispatch, tensors, mrope)
    module: str
    symbol: str
    fmt: str
    field_names: tuple[str, ...]  # the kernel-parameter struct's fields, in order
    values: tuple
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    device: int
    overlap_previous: bool = False  # a programmatic launch (sm_90 on: see core/archs.py)
    # (field, tensor argument, bytes added): where each tensor argument's pointer goes in the values, for a call
    # that refills them (the rotary offset and a packed cos|sin cache's sin half are byte offsets)
    pointers: tuple[tuple[str, str, int], ...] = ()
    then: "RopePlan | None" = None  # a second launch right after (rope_qk's k where no _qk variant serves)


@dataclass(frozen=True)
class Angles:
    """The resolved angle source: its variant name, the rotary dim and the kernel fields it fills."""

    kind: str
    rotary_dim: int
    fields: dict
    table_rows: int | None  # rows of a position-indexed table, None when any position is valid
    pointers: tuple[tuple[str, str, int], ...] = ()  # (field, tensor argument, bytes added) of its tables

    def any_source_fields(self) -> dict:
        """The fields of a kernel that takes any source (angles=any): this source's, the other sources' zero, and
        angle_kind, which picks this one."""
        return {**dispatch.ANY_ANGLE_FIELDS, **self.fields, "angle_kind": dispatch.ANGLE_KINDS[self.kind]}


def _table_2d(t: TensorInfo, name: str) -> tuple[int, int, int]:
    """(rows, width, row stride) of a [max_pos, width] table, also accepting [max_pos, 1, ..., 1, width]."""
    if t.ndim < 2 or any(n != 1 for n in t.shape[1:-1]):
        raise ValueError(f"{name}: expected shape [max_pos, width] (or [max_pos, 1, 1, width]), got {list(t.shape)}")
    if t.shape[-1] > 1 and t.strides[-1] != 1:
        raise ValueError(f"{name}: expected a contiguous last dimension, got strides {list(t.strides)}")
    return t.shape[0], t.shape[-1], t.strides[0]


def _check_rotary_dim(rotary_dim: int, head_dim: int) -> None:
    if rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"rotary_dim: expected an even number in [2, head_dim={head_dim}], got {rotary_dim}")


def _table_width_reading(width: int, head_dim: int, rotary_dim, name: str) -> int:
    """The rotary dim of a cos/sin table of ``width`` columns: rotary_dim when given; else the only reading that
    fits the head (full width: rotary_dim = width; half width, one entry per pair: 2 x width). Both fitting is
    ambiguous, and an error naming both readings."""
    if rotary_dim is not None:
        return rotary_dim
    readings = [rd for rd in (width, 2 * width) if rd % 2 == 0 and 0 < rd <= head_dim]
    if len(readings) == 2:
        raise ValueError(f"{name}: tables of width {width} with head_dim {head_dim} read two ways: full-width (one "
                         f"entry per feature) for rotary_dim={width}, or half-width (one entry per pair) for "
                         f"rotary_dim={2 * width}; give rotary_dim")
    if not readings:
        raise ValueError(f"{name}: tables of width {width} fit no rotary dim of head_dim {head_dim} (full-width "
                         f"{width} or half-width {2 * width})")
    return readings[0]


def resolve_angles(x: TensorInfo, head_dim: int, *, freqs, cos, sin, inv_freq, base, scale, rotary_dim,
                   cos_sin_cache=None) -> Angles:
    given = [n for n, v in (("freqs", freqs), ("cos/sin", cos if cos is not None else sin),
                            ("cos_sin_cache", cos_sin_cache), ("inv_freq", inv_freq), ("base", base)) if v is not None]
    if len(given) != 1:
        raise ValueError("angles: expected exactly one of freqs, cos/sin, cos_sin_cache, inv_freq, base; got "
                         f"{given or 'none'}")
    table = given[0] in ("freqs", "cos/sin", "cos_sin_cache")
    if table and scale != 1.0:
        raise ValueError(f"rope_scale: applies to inv_freq and base only; got rope_scale={scale} with {given[0]}")
    for name, t in (("freqs", freqs), ("cos", cos), ("sin", sin), ("cos_sin_cache", cos_sin_cache),
                    ("inv_freq", inv_freq)):
        if t is not None and t.device != x.device:
            raise ValueError(f"{name}: expected a tensor on {device_name(x.device)}, got one on {device_name(t.device)}")

    if freqs is not None:
        if freqs.dtype != "fp32":
            raise TypeError(f"freqs: expected float32 angles, got {freqs.dtype}")
        rows, width, row_stride = _table_2d(freqs, "freqs")
        rd = width if rotary_dim is None else rotary_dim
        if rd != width:
            raise ValueError(f"freqs: expected width rotary_dim={rd}, got {width}")
        _check_rotary_dim(rd, head_dim)
        return Angles("freqs", rd, {"table": freqs.ptr, "table_row": row_stride, "table_rows": rows}, rows,
                      (("table", "freqs", 0),))

    if cos_sin_cache is not None:
        # vLLM's, SGLang's and FlashInfer's packed table [max_pos, rotary_dim]: cos of the rotary_dim / 2 pairs, then
        # their sin. It is a half-width cos table and a half-width sin table sharing rows.
        c = cos_sin_cache
        if c.dtype not in (x.dtype, "fp32"):
            raise TypeError(f"cos_sin_cache: expected float32 or x's dtype {x.dtype}, got {c.dtype}")
        rows, width, row_stride = _table_2d(c, "cos_sin_cache")
        rd = width if rotary_dim is None else rotary_dim
        if rd != width:
            raise ValueError(f"cos_sin_cache: expected width rotary_dim={rd} (cos | sin of its {rd // 2} pairs), "
                             f"got {width}")
        _check_rotary_dim(rd, head_dim)
        half = rd // 2
        fields = {"cos": c.ptr, "sin": c.ptr + half * c.itemsize, "cos_row": row_stride, "sin_row": row_stride,
                  "table_rows": rows, "per_pair": 1}
        kind = "cossin" if c.dtype == x.dtype else "cossinf32"
        return Angles(kind, rd, fields, rows, (("cos", "cos_sin_cache", 0), ("sin", "cos_sin_cache", half * c.itemsize)))

    if cos is not None or sin is not None:
        if cos is None or sin is None:
            raise ValueError("cos/sin: expected both cos and sin caches, got only " + ("cos" if sin is None else "sin"))
        if cos.dtype != sin.dtype or cos.dtype not in (x.dtype, "fp32"):
            raise TypeError(f"cos/sin: expected both in float32 or in x's dtype {x.dtype}, got {cos.dtype} and {sin.dtype}")
        rows, width, cos_row = _table_2d(cos, "cos")
        sin_rows, sin_width, sin_row = _table_2d(sin, "sin")
        if (sin_rows, sin_width) != (rows, width):
            raise ValueError(f"sin: expected the shape of cos {list(cos.shape)}, got {list(sin.shape)}")
        rd = _table_width_reading(width, head_dim, rotary_dim, "cos/sin")
        _check_rotary_dim(rd, head_dim)
        if width not in (rd, rd // 2):
            raise ValueError(f"cos/sin: expected width rotary_dim={rd} or rotary_dim/2={rd // 2}, got {width}")
        kind = "cossin" if cos.dtype == x.dtype else "cossinf32"
        fields = {"cos": cos.ptr, "sin": sin.ptr, "cos_row": cos_row, "sin_row": sin_row, "table_rows": rows,
                  "per_pair": int(width == rd // 2 and width != rd)}
        return Angles(kind, rd, fields, rows, (("cos", "cos", 0), ("sin", "sin", 0)))

    if inv_freq is not None:
        if inv_freq.dtype != "fp32" or inv_freq.ndim != 1:
            raise TypeError(f"inv_freq: expected a 1-D float32 tensor, got {inv_freq.dtype} of shape {list(inv_freq.shape)}")
        if inv_freq.shape[0] > 1 and inv_freq.strides[0] != 1:
            raise ValueError(f"inv_freq: expected a contiguous tensor, got stride {inv_freq.strides[0]}")
        rd = 2 * inv_freq.shape[0] if rotary_dim is None else rotary_dim
        if rd != 2 * inv_freq.shape[0]:
            raise ValueError(f"inv_freq: expected rotary_dim/2={rd // 2} entries, got {inv_freq.shape[0]}")
        _check_rotary_dim(rd, head_dim)
        return Angles("invfreq", rd, {"inv_freq": inv_freq.ptr, "scale": float(scale)}, None,
                      (("inv_freq", "inv_freq", 0),))

    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 0 or math.isinf(base):
        raise ValueError(f"base: expected a positive finite number, got {base!r}")
    rd = head_dim if rotary_dim is None else rotary_dim
    _check_rotary_dim(rd, head_dim)
    step = -2.0 * math.log2(base) / rd
    return Angles("base", rd, {"exponent_step": step, "ratio": 2.0**step, "scale": float(scale)}, None)


def _dense_view(t: TensorInfo, layout: str) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """(S, B, H, D) sizes and strides of a 4-D sbhd or bshd tensor; a 3-D thd tensor is [tokens, 1, h, d]."""
    if layout == "sbhd":
        return t.shape, t.strides
    if layout == "thd":
        (n, h, d), (sn, sh, sd) = t.shape, t.strides
        return (n, 1, h, d), (sn, 0, sh, sd)
    (b, s, h, d), (sb, ss, sh, sd) = t.shape, t.strides
    return (s, b, h, d), (ss, sb, sh, sd)


def _is_packed(sizes, strides, seq_major: bool) -> bool:
    """Rows of head_dim elements, heads back to back, tokens back to back in the given token order."""
    S, B, H, D = sizes
    ss, sb, sh, sd = strides
    row = H * D
    inner_n, inner_stride, outer_n, outer_stride = (B, sb, S, ss) if seq_major else (S, ss, B, sb)
    return (sd == 1 and (H == 1 or sh == D) and (inner_n == 1 or inner_stride == row)
            and (outer_n == 1 or outer_stride == inner_n * row))


def stride_count(x_sizes, x_strides, out_strides, seq_major: bool, packed_kernel: bool = True) -> int:
    """Stride arguments the kernel takes: 0 (packed rows, when ``packed_kernel``), 3 (unit feature
    stride) or 4."""
    if (packed_kernel and _is_packed(x_sizes, x_strides, seq_major)
            and _is_packed(x_sizes, out_strides, seq_major)):
        return 0
    D = x_sizes[3]
    if D == 1 or (x_strides[3] == 1 and out_strides[3] == 1):
        return 3
    return 4


def widest_vector(itemsize: int, rotary_dim: int, head_dim: int, interleaved: bool, copy_tail: bool,
                  strides: int, pointers: tuple[int, ...], row_strides: tuple[int, ...],
                  max_bytes: int = 16, rotary_offset: int = 0) -> int:
    """The widest vector (elements per access, at most ``max_bytes``) that keeps every access aligned
    and inside its row. ``pointers`` point at the rotated span (``rotary_offset`` features into each head)."""
    if strides == 4:
        return 1
    for v in (8, 4, 2, 1):
        if v * itemsize > max_bytes and v > 1:
            continue
        if (rotary_dim % (2 * v)) if interleaved else ((rotary_dim // 2) % v):
            continue
        if (copy_tail and (head_dim - rotary_dim) % v) or rotary_offset % v:
            continue
        if any(p % (v * itemsize) for p in pointers) or any(s % v for s in row_strides):
            continue
        return v
    return 1


def check_mscale(mscale) -> None:
    if not isinstance(mscale, (int, float)) or isinstance(mscale, bool) or not math.isfinite(mscale) or mscale <= 0:
        raise ValueError(f"mscale: expected a finite number > 0 (the factor of cos and sin), got {mscale!r}")


def check_rotary_offset(rotary_offset, head_dim: int, rotary_dim: int) -> None:
    if isinstance(rotary_offset, bool) or not isinstance(rotary_offset, int) or not (
            0 <= rotary_offset <= head_dim - rotary_dim):
        raise ValueError(f"rotary_offset: expected an int in [0, head_dim - rotary_dim = {head_dim - rotary_dim}] "
                         f"(the rotated features [rotary_offset, rotary_offset + {rotary_dim}) inside the head), "
                         f"got {rotary_offset!r}")


def check_index_tensor(t: TensorInfo, name: str, device: int) -> None:
    """positions, offsets: int32 or int64 on x's device."""
    if t.dtype not in INT_DTYPES:
        raise TypeError(f"{name}: expected int32 or int64, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name}: expected a tensor on {device_name(device)}, got one on {device_name(t.device)}")


def _positions(positions: TensorInfo | None, offsets, S: int, B: int, device: int) -> tuple[dict, tuple[int, int] | None]:
    """Kernel fields for positions/offsets, and the host-known position range (None if on the device)."""
    fields = {"positions": 0, "pos_stride_b": 0, "pos_stride_s": 0, "positions_int64": 0,
              "offsets": 0, "offsets_int64": 0, "offset": 0}
    if positions is not None:
        if offsets is not None:
            raise ValueError("offsets: positions are explicit; give positions or offsets, not both")
        check_index_tensor(positions, "positions", device)
        if positions.shape == (S,):
            fields["pos_stride_s"] = positions.strides[0]
        elif positions.shape == (B, S):
            fields["pos_stride_b"], fields["pos_stride_s"] = positions.strides
        else:
            raise ValueError(f"positions: expected shape [{S}] or [{B}, {S}] (seq, or batch x seq), got {list(positions.shape)}")
        fields["positions"], fields["positions_int64"] = positions.ptr, int(positions.dtype == "int64")
        return fields, None
    if offsets is None:
        return fields, (0, S - 1)
    if isinstance(offsets, TensorInfo):
        check_index_tensor(offsets, "offsets", device)
        if offsets.shape != (B,) or (B > 1 and offsets.strides[0] != 1):
            raise ValueError(f"offsets: expected a contiguous tensor of shape [{B}] (one per sequence), "
                             f"got shape {list(offsets.shape)}, strides {list(offsets.strides)}")
        fields["offsets"], fields["offsets_int64"] = offsets.ptr, int(offsets.dtype == "int64")
        return fields, None
    if isinstance(offsets, bool) or not isinstance(offsets, int) or abs(offsets) >= 2**62:
        raise TypeError(f"offsets: expected an int or an int tensor of shape [{B}], got {offsets!r}")
    fields["offset"] = offsets
    return fields, (offsets, offsets + S - 1)


def _sectioned_positions(positions: TensorInfo | None, offsets, mrope_section, mrope_interleaved, S: int, B: int,
                         rotary_dim: int, device: int) -> dict:
    """Kernel fields for M-RoPE's positions [3, s] or [3, b, s] and its sections."""
    if positions is None:
        raise ValueError("positions: M-RoPE (mrope_section) needs explicit positions of shape [3, seq] or "
                         "[3, batch, seq] (time, height and width)")
    if not isinstance(mrope_section, (tuple, list)) or len(mrope_section) != 3 or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in mrope_section):
        raise TypeError(f"mrope_section: expected three ints >= 0 (the rotary pairs of time, height and width), "
                        f"got {mrope_section!r}")
    if sum(mrope_section) != rotary_dim // 2:
        raise ValueError(f"mrope_section: the sections must cover the {rotary_dim // 2} rotary pairs (rotary_dim / 2), "
                         f"got {list(mrope_section)} (sum {sum(mrope_section)})")
    if not isinstance(mrope_interleaved, bool):
        raise TypeError(f"mrope_interleaved: expected a bool, got {mrope_interleaved!r}")
    if offsets is not None:
        raise ValueError("offsets: positions are explicit; give positions or offsets, not both")
    check_index_tensor(positions, "positions", device)
    fields = {"positions": positions.ptr, "positions_int64": int(positions.dtype == "int64"), "pos_stride_b": 0,
              "offsets": 0, "offsets_int64": 0, "offset": 0}
    if positions.shape == (3, S):
        fields["pos_stride_r"], fields["pos_stride_s"] = positions.strides
    elif positions.shape == (3, B, S):
        fields["pos_stride_r"], fields["pos_stride_b"], fields["pos_stride_s"] = positions.strides
    else:
        raise ValueError(f"positions: M-RoPE expects shape [3, {S}] or [3, {B}, {S}] (time/height/width x seq, or x "
                         f"batch x seq), got {list(positions.shape)}")
    fields["section_t"], fields["section_h"], fields["section_w"] = mrope_section
    fields["sections_interleaved"] = int(mrope_interleaved)
    return fields


def _check_cp(cp_size, cp_rank) -> None:
    for name, v in (("cp_size", cp_size), ("cp_rank", cp_rank)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}: expected an int, got {v!r}")
    if cp_size < 1:
        raise ValueError(f"cp_size: expected >= 1, got {cp_size}")
    if not 0 <= cp_rank < cp_size:
        raise ValueError(f"cp_rank: expected an int in [0, cp_size={cp_size}), got {cp_rank}")


@dataclass(frozen=True)
class PackedSequences:
    """What the host knows of a thd call's cu_seqlens: the count, and the longest local sequence if known."""

    num_seqs: int
    max_local: int | None  # longest local sequence (tokens on this rank), from host values or max_seqlen
    max_global: int | None  # longest global sequence, likewise


def check_cu_seqlens(cu: TensorInfo, host: tuple[int, ...] | None, tokens: int, cp_size: int, device: int,
                     max_seqlen) -> PackedSequences:
    """Validates cu_seqlens; with its values on the host (a CPU tensor) also their order and divisibility."""
    if cu.dtype != "int32":
        raise TypeError(f"cu_seqlens: expected int32, got {cu.dtype}")
    if cu.ndim != 1 or cu.shape[0] < 1 or (cu.shape[0] > 1 and cu.strides[0] != 1):
        raise ValueError(f"cu_seqlens: expected a contiguous 1-D tensor [num_seqs + 1], got shape {list(cu.shape)}, "
                         f"strides {list(cu.strides)}")
    if cu.device != device:
        raise ValueError(f"cu_seqlens: expected a tensor on {device_name(device)}, got one on {device_name(cu.device)}")
    if max_seqlen is not None and (isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int) or max_seqlen < 0):
        raise TypeError(f"max_seqlen: expected a non-negative int (the longest global sequence), got {max_seqlen!r}")
    num_seqs = cu.shape[0] - 1
    if host is None:
        max_local = None if max_seqlen is None else -(-max_seqlen // cp_size)
        return PackedSequences(num_seqs, max_local, max_seqlen)
    lengths = [b - a for a, b in zip(host, host[1:])]
    if host[0] < 0 or any(n < 0 for n in lengths):
        raise ValueError(f"cu_seqlens: expected non-negative, non-decreasing offsets, got {list(host[:8])}"
                         f"{' ...' if len(host) > 8 else ''}")
    chunk = 2 * cp_size if cp_size > 1 else 1
    bad = [i for i, n in enumerate(lengths) if n % chunk]
    if bad:
        raise ValueError(f"cu_seqlens: with cp_size={cp_size} every sequence length must be divisible by "
                         f"2 * cp_size = {chunk}; sequence {bad[0]} has {lengths[bad[0]]} tokens")
    if host[-1] // cp_size > tokens:
        raise ValueError(f"cu_seqlens: the last offset / cp_size = {host[-1] // cp_size} exceeds the {tokens} "
                         f"tokens of x")
    longest = max(lengths, default=0)
    if max_seqlen is not None and max_seqlen < longest:
        raise ValueError(f"max_seqlen: {max_seqlen} is shorter than the longest sequence in cu_seqlens ({longest})")
    return PackedSequences(num_seqs, longest // cp_size, longest)


def choose_thd_dispatch(seqs: PackedSequences, tokens: int, tokens_per_block: int, mode: str,
                        tuning: str | None) -> tuple[str, int]:
    """("token" or "grid", blocks along x for grid). The rule: grid when its blocks (sequences times the
    blocks of the longest sequence) are at most ROPE_THD_GRID_MAX_WASTE[tuning] times the token path's (a tuning
    target or an arch: core.archs.tuned), a threshold that `cukiln tune rope-thd` measures; token otherwise, and
    whenever grid cannot run."""
    if mode not in THD_DISPATCH_MODES:
        raise ValueError(f"CUKILN_ROPE_THD_DISPATCH: expected one of {', '.join(THD_DISPATCH_MODES)}, got {mode!r}")
    longest = seqs.max_local if seqs.max_local is not None else tokens
    grid_x = max(1, -(-min(longest, tokens) // tokens_per_block))
    grid_possible = seqs.num_seqs <= GRID_Y_MAX
    if mode == "grid":
        if not grid_possible:
            raise ValueError(f"cu_seqlens: grid dispatch takes at most {GRID_Y_MAX} sequences, got {seqs.num_seqs}")
        return "grid", grid_x
    if mode == "token" or not grid_possible:
        return "token", grid_x
    limit = tuned(dispatch.ROPE_THD_GRID_MAX_WASTE, tuning, dispatch.ROPE_THD_GRID_MAX_WASTE_DEFAULT)
    token_blocks = -(-tokens // tokens_per_block)
    return ("grid" if grid_x * seqs.num_seqs <= limit * token_blocks else "token"), grid_x


@dataclass(frozen=True)
class _Validated:
    """A call whose arguments passed every check: what choosing the launch and filling the fields need."""

    sizes: tuple[int, int, int, int]  # (S, B, H, D) of x seen as sbhd
    x_strides: tuple[int, int, int, int]
    out_strides: tuple[int, int, int, int]
    angles: Angles
    pos_fields: dict
    seqs: PackedSequences | None  # thd by cu_seqlens; None for dense layouts and thd with positions
    in_place: bool
    rotary_offset: int
    mscale: float  # cos and sin multiplied by it (YaRN's and LongRoPE's attention factor)
    mrope: bool = False  # M-RoPE: three positions a token, each owning a section of the pairs (pos_fields has them)


@dataclass(frozen=True)
class _Operand:
    """One tensor a launch rotates (x, or rope_qk's k) and the one it writes, with their layout."""

    x: TensorInfo
    out: TensorInfo
    x_arg: str  # the tensor arguments they came from: ("x", "out") or ("k", "k_out")
    out_arg: str
    sizes: tuple[int, int, int, int]  # (S, B, H, D)
    x_strides: tuple[int, int, int, int]
    out_strides: tuple[int, int, int, int]

    def span_pointers(self, rotary_offset: int) -> tuple[int, int]:
        """x's and out's addresses of the rotated span's first feature (the kernels' base pointers)."""
        return (self.x.ptr + rotary_offset * self.x_strides[3] * self.x.itemsize,
                self.out.ptr + rotary_offset * self.out_strides[3] * self.out.itemsize)


# Heads split over blockIdx.z (dense layouts): when a grid has fewer blocks than SMALL_GRID_SHARE of the
# multiprocessors, its heads spread over more blocks, about one per multiprocessor in all (decode-size calls).
SMALL_GRID_SHARE = 0.5
# q and k in one launch at this many tokens per multiprocessor or more: two tokens a block, half the head rows
# each (every thread rotates twice the heads, the grid halves). Measured on an H100 for GQA 32/8 at d 128
# (results/thd-token-order-ab-h100-2026-11-25.json): 0.94x the time at 65536 tokens and 0.98x at 4096; at 256
# tokens, where the halved grid falls under one block per multiprocessor, 1.25x. Single tensors: no difference.
PAIR_TWO_TOKENS_PER_SM = 16
# q and k together in a small grid: spread to about this many blocks a multiprocessor, one head a thread. Measured
# on an H100 against the single-tensor split (one block a multiprocessor, two heads a thread), same run, mirrored
# order (results/rope-qk-small-grid-split-h100-2026-11-25.json): 2.33 -> 2.22 us at 1 token, 2.46 -> 2.34 at 16,
# 2.61 -> 2.56 at 64 tokens of 32/32 heads d 64, 3.43 -> 3.29 at d 256; 2.52 -> 2.64 at 64 tokens of GQA 32/8.
PAIR_SPLIT_BLOCKS_PER_SM = 4


def plan_rope(x: TensorInfo, out: TensorInfo, *, freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None,
              base=None, rope_scale=1.0, mscale=1.0, layout="sbhd", interleaved=False, rotary_dim=None, rotary_offset=0,
              positions=None, mrope_section=None, mrope_interleaved=False, offsets=None,
              cu_seqlens: TensorInfo | None = None, cu_seqlens_host: tuple[int,
              ...] | None = None, cp_size=1, cp_rank=0, max_seqlen=None, thd_dispatch: str = "auto",
              arch: str | None = None, backward=False, inplace=False, guarded: tuple[tuple[str, TensorInfo], ...] = (),
              rule: dict | None = None, k: TensorInfo | None = None, k_out: TensorInfo | None = None,
              sms: int = 132, tuning: str | None = None) -> RopePlan | None:
    """The launch for one call, or None when there is nothing to do (an empty tensor).

    ``out`` is the tensor written: x itself for an in-place call. ``guarded`` are the inputs that ``out``
    must not overlap (angle tables, positions, offsets, cu_seqlens). ``cu_seqlens_host`` are the values of
    cu_seqlens when the caller has them on the host (then fully checked); ``thd_dispatch`` forces token or
    grid dispatch; ``arch`` (e.g. "sm_90") selects the tuned rules (``tuning``, a tuning target, in its place
    where given: core.archs.tuned); ``rule`` replaces the dense launch rule
    (launch_rule) for measurements. ``k`` / ``k_out``: a second tensor of the same tokens and the one written
    for it (rope_qk), rotated in the same launch where a _qk variant serves the call, else by the plan's
    ``then``. ``sms``: the GPU's multiprocessors (small grids split their heads over more blocks).
    """
    call = validate(x, out, freqs=freqs, cos=cos, sin=sin, cos_sin_cache=cos_sin_cache, inv_freq=inv_freq, base=base,
                    rope_scale=rope_scale, mscale=mscale, layout=layout, rotary_dim=rotary_dim, rotary_offset=rotary_offset,
                    positions=positions, offsets=offsets, cu_seqlens=cu_seqlens, cu_seqlens_host=cu_seqlens_host,
                    cp_size=cp_size, cp_rank=cp_rank, max_seqlen=max_seqlen, inplace=inplace, guarded=guarded,
                    mrope_section=mrope_section, mrope_interleaved=mrope_interleaved)
    operands = [_Operand(x, out, "x", "out", call.sizes, call.x_strides, call.out_strides)]
    if k is not None:
        operands.append(validate_second(x, out, k, k_out, call, layout=layout, inplace=inplace, guarded=guarded))
    if x.numel == 0 or (call.seqs is not None and call.seqs.num_seqs == 0):
        return None  # nothing to rotate (with no sequence, every token lies past the last one's end)
    rule = rule or launch_rule(tuning or arch, layout)
    common = dict(call=call, interleaved=interleaved, thd_dispatch=thd_dispatch, arch=arch, tuning=tuning or arch,
                  rule=rule, sms=sms,
                  cp_size=cp_size, cp_rank=cp_rank, cu_seqlens=cu_seqlens, backward=backward, layout=layout)
    if len(operands) == 2:
        together = _plan_launch(operands, **common)
        if together is not None:
            return together
        # no _qk variant serves this call (packed sequences, a strided last dim): k takes a launch of its own
        first = _plan_launch(operands[:1], **common)
        return replace(first, then=_plan_launch(operands[1:], **common))
    return _plan_launch(operands, **common)


def _plan_launch(operands: list[_Operand], *, call: _Validated, interleaved, thd_dispatch, arch, tuning, rule, sms,
                 cp_size, cp_rank, cu_seqlens, backward, layout) -> RopePlan | None:
    """One launch rotating ``operands`` (one tensor, or q and k together: None when no variant serves them)."""
    key, grid, block, seq_major = _choose_launch(operands, call, interleaved, thd_dispatch, tuning, rule, sms)
    entry = dispatch.ROPE.get(key)
    if entry is None:
        if len(operands) == 2:
            return None
        raise AssertionError(f"no RoPE variant for {key}: the variant space and the planner disagree")
    module, symbol, layout_id = entry
    names, fmt = dispatch.ROPE_PARAMS[layout_id]
    fields = _fields(operands, call, seq_major, cp_size, cp_rank, cu_seqlens, backward)
    pointers = _pointer_fields(operands, call)
    return RopePlan(key, module, symbol, fmt, names, tuple(fields[n] for n in names), grid, block,
                    operands[0].x.device, programmatic_launch(arch),
                    tuple(p for p in pointers if p[0] in names))


def _pointer_fields(operands: list[_Operand], call: _Validated) -> tuple[tuple[str, str, int], ...]:
    """(field, tensor argument, bytes added) of every pointer a launch of ``operands`` takes."""
    found = []
    for field_x, field_out, op in zip(("x", "k"), ("out", "k_out"), operands):
        x_at, out_at = op.span_pointers(call.rotary_offset)
        found += [(field_x, op.x_arg, x_at - op.x.ptr), (field_out, op.out_arg, out_at - op.out.ptr)]
    found += list(call.angles.pointers)
    if call.pos_fields["positions"]:
        found.append(("positions", "positions", 0))
    if call.pos_fields["offsets"]:
        found.append(("offsets", "offsets", 0))
    if call.seqs is not None:
        found.append(("cu_seqlens", "cu_seqlens", 0))
    return tuple(found)


def validate(x: TensorInfo, out: TensorInfo, *, freqs, cos, sin, inv_freq, base, rope_scale, mscale, layout, rotary_dim,
             positions, offsets, cu_seqlens, cu_seqlens_host, cp_size, cp_rank, max_seqlen, inplace,
             guarded, cos_sin_cache=None, rotary_offset=0, mrope_section=None, mrope_interleaved=False) -> _Validated:
    """Every check of a call that does not depend on the launch chosen; ValueError/TypeError naming the argument.
    (The float64 reference runs it too: it takes the calls the kernels take.)"""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {', '.join(LAYOUTS)}, got {layout!r}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"x: expected float32, float16 or bfloat16, got {x.dtype}")
    expected_ndim = 3 if layout == "thd" else 4
    if x.ndim != expected_ndim:
        raise ValueError(f"x: expected a {expected_ndim}-D tensor in layout {layout}, got shape {list(x.shape)}")
    if not isinstance(rope_scale, (int, float)) or isinstance(rope_scale, bool) or not math.isfinite(rope_scale):
        raise TypeError(f"rope_scale: expected a finite number, got {rope_scale!r}")
    check_mscale(mscale)
    _check_cp(cp_size, cp_rank)
    packed = layout == "thd" and positions is None
    if mrope_interleaved is not False and mrope_section is None:
        raise ValueError("mrope_interleaved: only with mrope_section (M-RoPE's sections)")
    if mrope_section is not None and positions is None:
        raise ValueError("positions: M-RoPE (mrope_section) needs explicit positions of shape [3, seq] or "
                         "[3, batch, seq] (time, height and width)")
    if layout != "thd" and cu_seqlens is not None:
        raise ValueError(f"cu_seqlens: only with layout 'thd', got layout {layout!r}")
    if positions is not None and cu_seqlens is not None:
        raise ValueError("positions: give each token's position or cu_seqlens, not both")
    if positions is not None and cp_size > 1:
        raise ValueError(f"cp_size: explicit positions already place every token; expected cp_size 1, got {cp_size}")
    if packed and cu_seqlens is None:
        raise ValueError("cu_seqlens: layout 'thd' needs cu_seqlens (int32 [num_seqs + 1]) or explicit positions")
    sizes, x_strides = _dense_view(x, layout)
    S, B, H, D = sizes
    angles = resolve_angles(x, D, freqs=freqs, cos=cos, sin=sin, cos_sin_cache=cos_sin_cache, inv_freq=inv_freq,
                            base=base, scale=rope_scale, rotary_dim=rotary_dim)
    check_rotary_offset(rotary_offset, D, angles.rotary_dim)
    seqs = None
    if packed:
        seqs = check_cu_seqlens(cu_seqlens, cu_seqlens_host, S, cp_size, x.device, max_seqlen)
        pos_fields, pos_range = _positions(None, offsets, S, seqs.num_seqs, x.device)
        if seqs.max_global is None or pos_range is None:
            pos_range = None
        else:
            pos_range = (pos_range[0], pos_range[0] + max(seqs.max_global, 1) - 1)
    else:
        if cp_size > 1 and S % 2:  # (thd with positions has cp_size 1, checked above)
            raise ValueError(f"x: with cp_size={cp_size} the global sequence length (local {S} x cp_size) must be "
                             f"divisible by 2 * cp_size = {2 * cp_size}, so the local length must be even")
        if mrope_section is not None:
            pos_fields, pos_range = _sectioned_positions(positions, offsets, mrope_section, mrope_interleaved, S, B,
                                                         angles.rotary_dim, x.device), None
        else:
            pos_fields, pos_range = _positions(positions, offsets, S, B, x.device)
        if pos_range is not None and cp_size > 1:
            pos_range = (pos_range[0], pos_range[0] + S * cp_size - 1)
    if angles.table_rows is not None and pos_range is not None and S > 0:
        lo, hi = pos_range
        if lo < 0 or hi >= angles.table_rows:
            raise ValueError(f"positions: {lo}..{hi} fall outside the angle table of {angles.table_rows} rows")

    in_place = _check_written(x, out, "x", "out", inplace, guarded)
    if S * B > MAX_TOKENS or H > INT32_MAX // max(D, 1):
        raise ValueError(f"x: at most {MAX_TOKENS} tokens (seq x batch) and {INT32_MAX} heads x head_dim, "
                         f"got shape {list(x.shape)}")
    return _Validated(sizes, x_strides, _dense_view(out, layout)[1], angles, pos_fields, seqs, in_place,
                      rotary_offset, float(mscale), mrope_section is not None)


def _check_written(x: TensorInfo, out: TensorInfo, x_name: str, out_name: str, inplace: bool, guarded) -> bool:
    """The checks of the tensor a call writes for ``x`` (x itself in place); True when it writes x in place."""
    in_place = inplace or out.same_view(x)
    if inplace and not out.same_view(x):
        raise ValueError(f"{out_name}: inplace=True writes {x_name} itself; got a different {out_name} tensor")
    if not in_place:
        for what, want, got in (("shape", list(x.shape), list(out.shape)), ("dtype", x.dtype, out.dtype),
                                ("device", device_name(x.device), device_name(out.device))):
            if want != got:  # each fact named alone, as the one that differs
                raise ValueError(f"{out_name}: expected {x_name}'s {what} {want}, got {got}")
        if out.overlaps(x):
            raise ValueError(f"{out_name}: overlaps {x_name} without being exactly {x_name} (use inplace=True to "
                             f"rotate {x_name} itself)")
    if out.has_internal_overlap():
        raise ValueError(f"{x_name if in_place else out_name}: written tensor has a broadcast (stride 0) dimension, "
                         f"strides {list(out.strides)}")
    for name, t in guarded:
        if t is not None and out.overlaps(t):
            raise ValueError(f"{out_name}: overlaps {name}, which the kernel reads while it writes {out_name}")
    return in_place


def validate_second(x: TensorInfo, out: TensorInfo, k: TensorInfo, k_out: TensorInfo, call: _Validated, *, layout,
                    inplace, guarded) -> _Operand:
    """rope_qk's k (and the tensor written for it): the tokens of x, its own heads and strides, the head dim of x,
    and no overlap between what one tensor writes and what the call reads or writes elsewhere."""
    if k.dtype != x.dtype or k.device != x.device:
        raise TypeError(f"k: expected q's dtype {x.dtype} on {device_name(x.device)}, got {k.dtype} on {device_name(k.device)}")
    if k.ndim != x.ndim:
        raise ValueError(f"k: expected a {x.ndim}-D tensor like q in layout {layout}, got shape {list(k.shape)}")
    sizes, strides = _dense_view(k, layout)
    if (sizes[0], sizes[1], sizes[3]) != (call.sizes[0], call.sizes[1], call.sizes[3]):
        raise ValueError(f"k: expected q's tokens and head dim (shape {list(x.shape)} but for the heads), got "
                         f"{list(k.shape)}")
    _check_written(k, k_out, "k", "k_out", inplace, guarded + (("q", x), ("out", out)))
    if not call.in_place and (out.overlaps(k) or out.overlaps(k_out)):
        raise ValueError("out: overlaps k or k_out, which the kernel reads or writes for k")
    if k.overlaps(x) or k_out.overlaps(out):
        raise ValueError("k: overlaps q (rotating one would change the other)")
    return _Operand(k, k_out, "k", "k_out", sizes, strides, _dense_view(k_out, layout)[1])


def _choose_launch(operands: list[_Operand], call: _Validated, interleaved: bool, thd_dispatch: str,
                   tuning: str | None, rule: dict, sms: int) -> tuple[tuple, tuple[int, int, int], tuple[int, int, int], bool]:
    """(dispatch key, grid, block, seq_major): the variant and the launch shape for ``operands`` (the first one's
    token order and layout lead)."""
    lead = operands[0]
    S, B, _, D = lead.sizes
    H = sum(op.sizes[2] for op in operands)
    rd = call.angles.rotary_dim
    tokens = S * B
    seq_major = B == 1 or (S > 1 and lead.x_strides[0] >= lead.x_strides[1])
    # the most general addressing any operand needs (packed rows are 3-stride rows too)
    strides = max(stride_count(op.sizes, op.x_strides, op.out_strides, seq_major, rule["packed_kernel"])
                  for op in operands)
    copy_tail = not call.in_place and rd < D
    pointers = tuple(p for op in operands for p in op.span_pointers(call.rotary_offset))
    row_strides = tuple(st for op in operands for n, st in zip(op.sizes[:3] * 2, op.x_strides[:3] + op.out_strides[:3])
                        if n > 1)
    vec = widest_vector(lead.x.itemsize, rd, D, interleaved, copy_tail, strides, pointers, row_strides,
                        rule["max_vector_bytes"], call.rotary_offset)
    # the stride between consecutive tokens: along b (seq-major) or s, unless that dim has one entry (its stride
    # is then arbitrary: 0 in thd's dense view)
    token_stride = lead.x_strides[1] if (seq_major and B > 1) or S == 1 else lead.x_strides[0]
    head_outer = H > 1 and tokens > 1 and lead.x_strides[2] > token_stride
    two_tokens = head_outer or (len(operands) == 2 and tokens >= PAIR_TWO_TOKENS_PER_SM * sms)
    block = block_shape(rd // 2 // vec, H, tokens, two_tokens, rule["max_threads"], rule["min_threads"],
                        head_passes(rule, lead.x.itemsize, rd, D, pair=len(operands) == 2))
    grid = (-(-tokens // block[2]), 1, 1)
    mode = "none"
    if call.seqs is not None:
        mode, grid_x = choose_thd_dispatch(call.seqs, tokens, block[2], thd_dispatch, tuning)
        if mode == "grid":
            grid = (grid_x, call.seqs.num_seqs, 1)
    else:
        block, grid = split_heads(block, grid, H, sms, pair=len(operands) == 2)
    key = (lead.x.dtype, "thd" if call.seqs is not None else "dense", "interleaved" if interleaved else "half",
           call.angles.kind, strides, vec, mode, len(operands), call.mrope)
    return key, grid, block, seq_major


def split_heads(block: tuple[int, int, int], grid: tuple[int, int, int], heads: int, sms: int,
                pair: bool = False) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """A dense grid of fewer blocks than SMALL_GRID_SHARE of the ``sms`` multiprocessors spreads its heads over
    blockIdx.z, each block's head rows cut to its share: about one block per multiprocessor in all, each thread
    rotating two heads; for q and k together (``pair``) about PAIR_SPLIT_BLOCKS_PER_SM blocks a multiprocessor,
    each thread rotating one head."""
    blocks = grid[0] * grid[1]
    rows = heads if pair else -(-heads // dispatch.ROPE_HEADS_IN_FLIGHT)  # head rows a block of one split needs
    if blocks >= SMALL_GRID_SHARE * sms or rows < 2:
        return block, grid
    target = PAIR_SPLIT_BLOCKS_PER_SM * sms if pair else sms
    splits = min(-(-target // blocks), rows)
    if splits < 2:
        return block, grid
    by = min(block[1], -(-rows // splits))
    return (block[0], by, block[2]), (grid[0], grid[1], -(-rows // by))


def _fields(operands: list[_Operand], call: _Validated, seq_major: bool, cp_size: int, cp_rank: int,
            cu_seqlens: TensorInfo | None, backward: bool) -> dict:
    """Every kernel-parameter field a rope struct may have (each variant's struct takes those it names)."""
    S, B, H, D = call.sizes
    rd = call.angles.rotary_dim
    fields = {"tokens": S * B, "seq_len": S, "batch": B, "heads": H, "heads_k": 0, "head_dim": D, "rotary_dim": rd,
              "rotary_offset": call.rotary_offset, "seq_major": int(seq_major),
              "copy_tail": int(not call.in_place and rd < D), "backward": int(bool(backward)),
              "mscale": call.mscale}
    for names, op in zip((("x", "out"), ("k", "k_out")), operands):
        fields[names[0]], fields[names[1]] = op.span_pointers(call.rotary_offset)
        for prefix, st in zip(names, (op.x_strides, op.out_strides)):
            fields[f"{prefix}_ss"], fields[f"{prefix}_sb"], fields[f"{prefix}_sh"], fields[f"{prefix}_sd"] = st
    fields["heads"] = operands[0].sizes[2]
    if len(operands) == 2:
        fields["heads_k"] = operands[1].sizes[2]
    fields.update(call.pos_fields)
    fields.update(call.angles.any_source_fields())  # a kernel's names pick its own: its source's, or every source's
    packed = call.seqs is not None
    fields.update(cp_size=cp_size, cp_rank=cp_rank, cu_seqlens=cu_seqlens.ptr if packed else 0,
                  num_seqs=call.seqs.num_seqs if packed else 0)
    return fields


def launch_rule(tuning: str | None, layout: str) -> dict:
    """The launch choices in force: for dense layouts those `cukiln tune rope` measured for ``tuning`` (a tuning
    target or an arch: core.archs.tuned; dispatch.ROPE_LAUNCH), else dispatch.ROPE_LAUNCH_DEFAULT. thd keeps the
    defaults, which its own token/grid rule was tuned with."""
    if layout == "thd":
        return dispatch.ROPE_LAUNCH_DEFAULT
    return tuned(dispatch.ROPE_LAUNCH, tuning, dispatch.ROPE_LAUNCH_DEFAULT)


def head_passes(rule: dict, itemsize: int, rotary_dim: int, head_dim: int, pair: bool = False) -> int:
    """The launch rule's passes over the heads where it applies: to one 16-bit tensor rotated over the whole head.
    Where `cukiln tune rope` chose 2 (an H200), 16-bit full-width cases ran 5-10 % faster, while fp32 ran 0.2-2.3 % and
    rotary_dim = d/4 in place 5.5 % slower (generated/tuning/sm_90-h200.json; the rope sweep of 2026-12-02 agrees on
    d/4: 4 %). The tune times single tensors only, so q and k rotated together (``pair``) keep one pass."""
    return rule["head_passes"] if itemsize == 2 and rotary_dim == head_dim and not pair else 1


def block_shape(groups: int, heads: int, tokens: int, two_tokens: bool, max_threads: int,
                min_threads: int, head_passes: int = 1) -> tuple[int, int, int]:
    """(groups, head rows, tokens) per block.

    Small blocks finish the grid with a short tail, which is what separates a memory-bound kernel of
    50-100 us from a copy (docs/performance.md, the sweep of 2026-11-23): one token per block, every head
    visited once. With ``two_tokens``, two tokens per block and two passes over the heads: where heads lie
    outside tokens in memory (a (b, h, s, d) tensor seen as bshd) this keeps each head's rows contiguous, and
    q and k rotated together at many tokens run faster so (PAIR_TWO_TOKENS_PER_SM). Blocks of fewer
    than ``min_threads`` threads take more tokens, so the 32-blocks-per-SM limit does not cap
    occupancy; ``max_threads`` (from the launch rule) is capped at the kernels' launch bound. ``head_passes``
    (see head_passes) divides the head rows, so that each thread passes that many times over the heads, rotating them
    all with the angles it computed once.
    """
    max_threads = min(max_threads, dispatch.ROPE_MAX_THREADS)
    bx = min(groups, 32)
    by = max(1, min(-(-heads // (dispatch.ROPE_HEADS_IN_FLIGHT * head_passes)), max_threads // bx))
    bz = 1
    if two_tokens:  # half the head rows each, within the thread limit
        by, bz = max(1, min(-(-by // 2), max_threads // (2 * bx))), 2
    while bx * by * bz < min_threads and bz * 2 <= tokens and bx * by * bz * 2 <= max_threads:
        bz *= 2
    return bx, by, min(bz, tokens)
