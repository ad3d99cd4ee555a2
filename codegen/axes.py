"""What every op's variant space is made of: element types, the axis-record base class, the vector-width
constants, the pruning rules that several ops share, and the regex helpers that parse names back.

An op's own axes, rules and names live in its ``<op>_variants`` module; ``ops.py`` registers the op.
"""

from __future__ import annotations

import enum
import re
from dataclasses import fields


class Dtype(str, enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"

    @property
    def itemsize(self) -> int:
        return 4 if self is Dtype.FP32 else 2


VECTOR_WIDTHS = (1, 2, 4, 8)
MAX_VECTOR_BYTES = 16


class AxisRecord:
    """For variant dataclasses: the axis values (the fields, in order) as a dispatch key and as data."""

    def axes(self) -> dict[str, object]:
        """The axis values as plain JSON-friendly data."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.value if isinstance(value, enum.Enum) else value
        return out

    @property
    def key(self) -> tuple:
        """The runtime's dispatch key: every axis value, in field order."""
        return tuple(self.axes().values())


def first_rejection(rules, v) -> str | None:
    """The reason of the first rule in ``rules`` that rejects ``v``, or None if every rule keeps it."""
    for rule in rules:
        reason = rule(v)
        if reason is not None:
            return reason
    return None


# --- rules shared by ops whose variants have (dtype, strides, vec) axes ---------------------------------
# Each rule returns None when the combination is valid, else the reason it is not.


def rule_vector_fits_16_bytes(v) -> str | None:
    if v.vec * v.dtype.itemsize > MAX_VECTOR_BYTES:
        return f"vector of {v.vec} x {v.dtype.itemsize} bytes exceeds {MAX_VECTOR_BYTES} bytes"
    return None


def rule_general_strides_are_scalar(v) -> str | None:
    # With 4 strides the last dimension may be strided, so consecutive elements are not adjacent.
    if v.strides == 4 and v.vec != 1:
        return "4 strides (strided last dim) only with vector width 1"
    return None


def alternatives(values) -> str:
    """A regex alternation of the values (enum members' values, or plain values) for name patterns."""
    return "|".join(re.escape(str(getattr(m, "value", m))) for m in values)
