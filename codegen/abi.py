"""The kernel-parameter ABI every op shares: each kernel takes one struct by value whose fields are all 8 bytes
(a pointer, a 64-bit integer or a double), so the struct has no padding and the runtime packs it with one
``struct.pack`` whose format the dispatch table records. The one exception: TMA tensor maps (128 bytes, aligned to
64), which come first in a struct that has them, the struct padded to a multiple of 64 bytes.

An op's own fields (and its launch knobs) live in its ``<op>_abi`` module.
"""

from __future__ import annotations

from .axes import Dtype

PTR, CPTR, I64, F64 = "void*", "const void*", "long long", "double"
TMAP = "cukiln::TensorMap"  # a TMA tensor map, opaque bytes the runtime encodes per cache (runtime/driver.py)
TMAP_BYTES = 128
# Python struct codes for each C type above (little-endian, no padding: tensor maps first, then 8-byte fields).
STRUCT_CODE = {PTR: "Q", CPTR: "Q", I64: "q", F64: "d", TMAP: f"{TMAP_BYTES}s"}
# The element type names the templates use (common.cuh's storage types; arithmetic runs in fp32).
TEMPLATE_CTYPE = {Dtype.FP32: "float", Dtype.FP16: "f16", Dtype.BF16: "bf16"}

Params = tuple[tuple[str, str], ...]  # (C type, field name) of every field, in struct order


def struct_format(params: Params) -> str:
    ctypes = [ctype for ctype, _ in params]
    maps = ctypes.count(TMAP)
    assert ctypes[:maps] == [TMAP] * maps, "tensor maps come first (no padding before the 8-byte fields)"
    fmt = "<" + "".join(STRUCT_CODE[c] for c in ctypes)
    if maps:  # the struct's size is a multiple of its 64-byte alignment
        size = maps * TMAP_BYTES + 8 * (len(ctypes) - maps)
        fmt += f"{-size % 64}x" if size % 64 else ""
    return fmt


def param_structs(variants, params_fn, layout_id_fn, prefix: str = "params_") -> tuple[list[tuple[str, Params]],
                                                                                     dict[str, str]]:
    """The parameter structs a module's kernels take: one per params layout that ``variants`` use, named
    ``prefix`` + the layout's id (the dispatch table's entry of the same id describes it), as (name, fields) in
    first-use order; and each variant's struct name. Variants of one layout have the same fields (asserted), so the
    module declares each struct once where it declared one per variant."""
    structs: dict[str, Params] = {}
    struct_of = {}
    for v in variants:
        name, fields = prefix + layout_id_fn(v), tuple(params_fn(v))
        assert name.isidentifier() and structs.setdefault(name, fields) == fields, f"{v.name}: unlike its layout {name}"
        struct_of[v.name] = name
    return list(structs.items()), struct_of
