"""The kernel-parameter struct of each RoPE variant: one list that both the template and the runtime read.

Every field is 8 bytes (a pointer, a 64-bit integer or a double), so the struct has no padding and the
runtime packs it with one ``struct.pack`` whose format is recorded in the dispatch table.
"""

from __future__ import annotations

from .variants import Angles, Layout, RopeVariant

PTR, CPTR, I64, F64 = "void*", "const void*", "long long", "double"
# Python struct codes for each C type above (little-endian, no padding: all fields are 8 bytes).
STRUCT_CODE = {PTR: "Q", CPTR: "Q", I64: "q", F64: "d"}

_COMMON = (
    (CPTR, "x"),
    (PTR, "out"),
    (I64, "tokens"),
    (I64, "seq_len"),
    (I64, "batch"),
    (I64, "heads"),
    (I64, "head_dim"),
    (I64, "rotary_dim"),
    (I64, "seq_major"),
    (I64, "copy_tail"),
    (I64, "backward"),
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

_STRIDES = {
    0: (),
    3: tuple((I64, f"{t}_{a}") for t in ("x", "out") for a in ("ss", "sb", "sh")),
    4: tuple((I64, f"{t}_{a}") for t in ("x", "out") for a in ("ss", "sb", "sh", "sd")),
}

_TABLE_ROWS = ((I64, "table_rows"),)
_ANGLES = {
    Angles.FREQS: ((CPTR, "table"), (I64, "table_row")) + _TABLE_ROWS,
    Angles.COS_SIN: ((CPTR, "cos"), (CPTR, "sin"), (I64, "cos_row"), (I64, "sin_row")) + _TABLE_ROWS
    + ((I64, "per_pair"),),
    Angles.INV_FREQ: ((CPTR, "inv_freq"), (F64, "scale")),
    Angles.BASE: ((F64, "exponent_step"), (F64, "ratio"), (F64, "scale")),
}
_ANGLES[Angles.COS_SIN_F32] = _ANGLES[Angles.COS_SIN]


def rope_params(v: RopeVariant) -> tuple[tuple[str, str], ...]:
    """(C type, field name) of every kernel parameter of ``v``, in struct order."""
    packed = _PACKED if v.layout is Layout.THD else ()
    return _COMMON + packed + _STRIDES[v.strides] + _ANGLES[v.angles]


def struct_format(params: tuple[tuple[str, str], ...]) -> str:
    return "<" + "".join(STRUCT_CODE[ctype] for ctype, _ in params)
