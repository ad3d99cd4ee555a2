"""RoPE's kernel ABI and launch knobs: the parameter struct of each variant (one list that both the template and
the runtime read; every field 8 bytes, see abi.py), the launch-shape constants the template is rendered with,
and the dispatch rules' defaults for GPUs without tuning data.
"""

from __future__ import annotations

from .abi import CPTR, F64, I64, PTR, Params
from .rope_variants import SOURCES, Angles, Layout, RopeVariant

# Threads per block at most (the kernels' launch bound).
MAX_THREADS_PER_BLOCK = 256
# Heads whose loads one thread issues before its first store (kHeadsInFlight in rope.cuh.j2).
HEADS_IN_FLIGHT = 2
# Blocks per multiprocessor the register allocation must allow (__launch_bounds__ minimum): 80 registers a
# thread. The _qk variants reading angle tables (per-feature angles) at 16-byte vectors need more (the two
# tensors' addressing beside 32 angles spills at 80, on sm_80 or sm_90), and so do M-RoPE's variants at 16-byte
# vectors (three positions and a position picked per pair: 12 to 132 spilled bytes at 80), and M-RoPE's of any
# angle source at 4 elements an access (8 to 152 bytes at 80, 3-stride rows): they take 2 blocks, 128 registers.
MIN_BLOCKS_PER_SM = 3
MIN_BLOCKS_PER_SM_WIDE = 2
# Whether the loads of x and stores of out carry the evict-first (`.cs`) cache hint.
STREAMING = True

# Without tuning data for an arch: the widest vector that fits, the stride-free kernel for packed
# tensors, 64 to 256 threads per block, and one pass of a thread over a token's heads (head_passes; where it applies:
# rope_plan.head_passes). rope_plan.launch_rule and block_shape apply them; a table measured before a choice existed
# takes its default here.
LAUNCH_DEFAULT = {"max_vector_bytes": 16, "packed_kernel": True, "max_threads": MAX_THREADS_PER_BLOCK,
                  "min_threads": 64, "head_passes": 1}
# Without tuning data for an arch, thd takes grid dispatch only where it launches no more blocks than token.
THD_GRID_MAX_WASTE_DEFAULT = 1.0

_COMMON = (
    (CPTR, "x"),
    (PTR, "out"),
    (I64, "tokens"),
    (I64, "seq_len"),
    (I64, "batch"),
    (I64, "heads"),
    (I64, "heads_k"),  # the second tensor's heads (0 but in the _qk variants)
    (I64, "head_dim"),
    (I64, "rotary_dim"),
    (I64, "rotary_offset"),  # the rotated span's first feature
    (I64, "seq_major"),
    (I64, "copy_tail"),
    (I64, "backward"),
    (F64, "mscale"),  # cos and sin multiplied by it
    (CPTR, "positions"),
    (I64, "pos_stride_b"),
    (I64, "pos_stride_s"),
    (I64, "positions_int64"),
    (CPTR, "offsets"),
    (I64, "offsets_int64"),
    (I64, "offset"),
    (I64, "cp_size"),
    (I64, "cp_rank"),
)
# Packed sequences: int32 cu_seqlens[num_seqs + 1] on the device.
_PACKED = ((CPTR, "cu_seqlens"), (I64, "num_seqs"))

# M-RoPE: the stride between positions' three rows (time, height, width), the pairs each owns (section_t + section_h
# + section_w = rotary_dim / 2), and whether the sections interleave (Qwen3-VL) rather than follow one another.
_SECTIONS = ((I64, "pos_stride_r"), (I64, "section_t"), (I64, "section_h"), (I64, "section_w"),
             (I64, "sections_interleaved"))

# A second tensor of the same tokens (the _qk variants: rope_qk's k), and its rows' strides.
_PAIR = ((CPTR, "k"), (PTR, "k_out"))
_STRIDE_NAMES = {0: (), 3: ("ss", "sb", "sh"), 4: ("ss", "sb", "sh", "sd")}

_TABLE_ROWS = ((I64, "table_rows"),)
ANGLE_FIELDS = {  # each angle source's fields (kv_append's kernels take them too)
    Angles.FREQS: ((CPTR, "table"), (I64, "table_row")) + _TABLE_ROWS,
    Angles.COS_SIN: ((CPTR, "cos"), (CPTR, "sin"), (I64, "cos_row"), (I64, "sin_row")) + _TABLE_ROWS
    + ((I64, "per_pair"),),
    Angles.INV_FREQ: ((CPTR, "inv_freq"), (F64, "scale")),
    Angles.BASE: ((F64, "exponent_step"), (F64, "ratio"), (F64, "scale")),
}
ANGLE_FIELDS[Angles.COS_SIN_F32] = ANGLE_FIELDS[Angles.COS_SIN]
# Any source: every source's fields (once each), then which one serves (its index in rope_variants.SOURCES)
ANGLE_FIELDS[Angles.ANY] = tuple(dict.fromkeys(f for a in SOURCES for f in ANGLE_FIELDS[a])) + ((I64, "angle_kind"),)


def rope_params(v: RopeVariant) -> Params:
    """(C type, field name) of every kernel parameter of ``v``, in struct order."""
    packed = _PACKED if v.layout is Layout.THD else ()
    tensors = ("x", "out", "k", "k_out")[: 2 * v.tensors]
    strides = tuple((I64, f"{t}_{a}") for t in tensors for a in _STRIDE_NAMES[v.strides])
    sections = _SECTIONS if v.mrope else ()
    return _COMMON + sections + (_PAIR if v.tensors == 2 else ()) + packed + strides + ANGLE_FIELDS[v.angles]


def min_blocks_per_sm(v: RopeVariant) -> int:
    """The launch bound's blocks per multiprocessor of ``v`` (see MIN_BLOCKS_PER_SM)."""
    wide = (v.sixteen_bytes and (v.mrope or (v.tensors == 2 and v.angles in (Angles.FREQS, Angles.COS_SIN,
                                                                           Angles.COS_SIN_F32)))
            or (v.mrope and v.angles is Angles.ANY and v.vec >= 4))
    return MIN_BLOCKS_PER_SM_WIDE if wide else MIN_BLOCKS_PER_SM


def params_layout_id(v: RopeVariant) -> str:
    """Variants whose structs have the same fields share one entry of the dispatch table's ROPE_PARAMS."""
    return (f"{v.layout.value}_s{v.strides}_{v.angles.value}" + ("_qk" if v.tensors == 2 else "")
            + ("_mrope" if v.mrope else ""))
