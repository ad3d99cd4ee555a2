"""The kernel-parameter ABI every op shares: each kernel takes one struct by value whose fields are all 8 bytes
(a pointer, a 64-bit integer or a double), so the struct has no padding and the runtime packs it with one
``struct.pack`` whose format the dispatch table records.

An op's own fields (and its launch knobs) live in its ``<op>_abi`` module.
"""

from __future__ import annotations

from .axes import Dtype

PTR, CPTR, I64, F64 = "void*", "const void*", "long long", "double"
# Python struct codes for each C type above (little-endian, no padding: all fields are 8 bytes).
STRUCT_CODE = {PTR: "Q", CPTR: "Q", I64: "q", F64: "d"}
# The element type names the templates use (common.cuh's storage types; arithmetic runs in fp32).
TEMPLATE_CTYPE = {Dtype.FP32: "float", Dtype.FP16: "f16", Dtype.BF16: "bf16"}

Params = tuple[tuple[str, str], ...]  # (C type, field name) of every field, in struct order


def struct_format(params: Params) -> str:
    return "<" + "".join(STRUCT_CODE[ctype] for ctype, _ in params)

