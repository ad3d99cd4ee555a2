"""The fused decode-step family (``decode_step``): one launch that appends each row's new token to the KV caches
(kv_append's rotation, QK-norm and cache writes) and attends to the keys including it (decode's warp-specialized
attention), where the two-launch step (kv_append, then decode_attention) pays a second launch and the rotated
query's round trip through memory. The kernel body is decode.cuh's ``attend_ws`` with decode_step.cuh's prologue.

A variant is (dtype, head dim, pairing, angle source, QK-norm): the ws pipeline's head dims and element types,
kv_append's pairings, and as angles either any (Angles.ANY: every source but SAME_WIDTH_ANGLES', picked at run time) or
one of SAME_WIDTH_ANGLES, for appends planned with vectors at least as wide as the variant's rotation (``vec``:
ROTATION_VEC, or 16 bytes and exactly that for SAME_WIDTH_ANGLES). Its
parameter struct is the ws attention's struct followed by the kv_append variant's, so the runtime packs the two plans
it already makes one after the other (runtime/decode_step_api.py); calls outside the space (narrower vectors, other
pipelines or archs) take the two launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from . import decode_abi, jinja, kv_append_family
from .abi import TEMPLATE_CTYPE, TMAP, TMAP_BYTES, Params
from .axes import MAX_VECTOR_BYTES, AxisRecord, Dtype, alternatives
from .decode_variants import DECODE_DTYPES, HEAD_DIMS, DecodeVariant, Pipeline, decode_rejection
from .family import OpFamily
from .kv_append_family import KvAppendVariant
from .rope_family import ANGLE_SOURCES
from .rope_variants import SOURCES, Angles, Pairing
from .tables import dispatch_map_lines, keys_by_angle_source, params_table_lines

HEADER = "decode_step.cuh"
# Elements per access of the fused rotation and value copy: 8 bytes. At 16 (kv_append's widest) eight d-128 variants
# spilled 20-24 bytes on sm_90 under the ws block's register bound (table sources only). With a table or inv_freq a
# feature's arithmetic does not depend on the width, so an append planned with vectors at least this wide fuses and
# gives the same bits.
ROTATION_VEC = 4
# The angle sources whose arithmetic does depend on the width: BaseAngles computes exp2 at a group's first pair and
# multiplies by the ratio for the rest, so each pair's inverse frequency follows the group's width. Their variants
# rotate 16 bytes at a time (none spilled so), and a step fuses only where its append was planned at that width.
SAME_WIDTH_ANGLES = (Angles.BASE,)
STEP_ANGLES = (Angles.ANY,) + SAME_WIDTH_ANGLES


@dataclass(frozen=True, order=True)
class DecodeStepVariant(AxisRecord):
    """One compiled fused decode-step kernel: each field is a compile-time axis."""

    dtype: Dtype
    head_dim: int
    pairing: Pairing
    angles: Angles
    qk_norm: bool = False

    op = "decode_step"

    @property
    def name(self) -> str:
        norm = "_qknorm" if self.qk_norm else ""
        return f"decode_step_{self.dtype.value}_d{self.head_dim}_{self.pairing.value}_{self.angles.value}{norm}"

    @property
    def module(self) -> str:
        return f"decode_step_{self.dtype.value}" + ("_qknorm" if self.qk_norm else "")

    @property
    def vec(self) -> int:
        """Elements per access of the rotation and the value copy."""
        if self.angles in SAME_WIDTH_ANGLES:
            return MAX_VECTOR_BYTES // self.dtype.itemsize
        return ROTATION_VEC

    @property
    def attention(self) -> DecodeVariant:
        """The ws attention variant whose struct and body the kernel takes (16-byte K/V rows)."""
        return DecodeVariant(self.dtype, self.head_dim, 3, MAX_VECTOR_BYTES // self.dtype.itemsize, Pipeline.WS)

    @property
    def append(self) -> KvAppendVariant:
        """The kv_append variant whose struct (the same for every vector width) the kernel takes: the build's, of any
        angle source, whose plan's values the step packs (a SAME_WIDTH_ANGLES variant reads its source's fields)."""
        return KvAppendVariant(self.dtype, self.pairing, Angles.ANY, self.vec, self.qk_norm)

    @property
    def sources(self) -> tuple[Angles, ...]:
        """The angle sources the kernel serves."""
        if self.angles is Angles.ANY:
            return tuple(a for a in SOURCES if a not in SAME_WIDTH_ANGLES)
        return (self.angles,)


def rejection(v: DecodeStepVariant) -> str | None:
    """Its attention's reason, else its append's: the fused kernel takes what both kernels take."""
    if v.angles not in STEP_ANGLES:
        return "the fused step takes its angle source at run time (angles=any), or base (whose arithmetic follows the width)"
    reason = decode_rejection(v.attention)
    if reason is not None:
        return f"its attention: {reason}"
    return kv_append_family.rejection(v.append)


def enumerate_decode_step() -> Iterator[DecodeStepVariant]:
    for dtype in DECODE_DTYPES:
        for head_dim in HEAD_DIMS:
            for pairing in Pairing:
                for angles in STEP_ANGLES:
                    for qk_norm in (False, True):
                        v = DecodeStepVariant(dtype, head_dim, pairing, angles, qk_norm)
                        if rejection(v) is None:
                            yield v


_NAME_RE = re.compile(rf"^decode_step_(?P<dtype>{alternatives(DECODE_DTYPES)})_d(?P<head_dim>\d+)"
                      rf"_(?P<pairing>{alternatives(Pairing)})_(?P<angles>{alternatives(Angles)})"
                      r"(?P<qk_norm>_qknorm)?$")


def parse_decode_step_name(name: str) -> DecodeStepVariant:
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"not a decode_step variant name: {name!r}")
    v = DecodeStepVariant(Dtype(m["dtype"]), int(m["head_dim"]), Pairing(m["pairing"]), Angles(m["angles"]),
                          m["qk_norm"] is not None)
    reason = rejection(v)
    if reason is not None:
        raise ValueError(f"{name!r} names a pruned combination: {reason}")
    return v


# --- the parameter struct: the attention's, then the append's ----------------------------------------------------
def attention_params(v: DecodeStepVariant) -> Params:
    return decode_abi.decode_params(v.attention, tokens=False)  # a step's query: one token a row


def append_params(v: DecodeStepVariant) -> Params:
    return kv_append_family.kv_append_params(v.append)


def decode_step_params(v: DecodeStepVariant) -> Params:
    """(C type, field name) of every kernel parameter of ``v``, in struct order: the attention's fields, then the
    append's, each named after its part ("attention.q", "append.q")."""
    attention = attention_params(v)
    maps = sum(1 for c, _ in attention if c == TMAP)
    # the append's struct starts where the attention's ends: no padding between them (the tensor maps' 64-byte
    # alignment is the attention struct's, and its size is a multiple of it)
    assert (maps * TMAP_BYTES + 8 * (len(attention) - maps)) % 64 == 0, "the attention struct needs no padding"
    return (tuple((c, f"attention.{f}") for c, f in attention)
            + tuple((c, f"append.{f}") for c, f in append_params(v)))


def params_layout_id(v: DecodeStepVariant) -> str:
    return kv_append_family.params_layout_id(v.append)


def threads(v: DecodeStepVariant) -> int:
    return decode_abi.max_threads(v.attention)


# --- rendering and the dispatch table --------------------------------------------------------------------------
def render_headers() -> dict[str, str]:
    return {HEADER: jinja.render("decode_step.cuh.j2")}


def render_module(dtype: Dtype, variants: list[DecodeStepVariant]) -> str:
    assert all(v.module == variants[0].module for v in variants), "one element type and QK-norm per module"
    ws = Pipeline.WS
    return jinja.render(
        "decode_step.cu.j2", dtype=dtype, dtype_ctype=TEMPLATE_CTYPE[dtype], variants=variants,
        vec={v.name: v.vec for v in variants}, threads=threads(variants[0]), angle_sources=ANGLE_SOURCES,
        attention_params={v.name: attention_params(v) for v in variants},
        append_params={v.name: append_params(v) for v in variants},
        geometry={v.name: (ws.tile_keys, decode_abi.stages(v.head_dim, ws),
                           decode_abi.min_blocks_per_sm(v.head_dim, ws)) for v in variants})


def _widths(variants: list[DecodeStepVariant]) -> dict[str, int]:
    widths = {a.value: v.vec for v in variants for a in v.sources}
    assert all(widths[a.value] == v.vec for v in variants for a in v.sources), "one width per angle source"
    return dict(sorted(widths.items()))


def dispatch_lines(variants: list[DecodeStepVariant], tuning: dict[str, dict]) -> list[str]:
    lines = [
        "# The fused decode step (the append in the ws attention's launch). DECODE_STEP maps (dtype, head dim,",
        "# pairing, angle source, QK-norm) to (module, symbol, params layout); DECODE_STEP_PARAMS maps a params layout to",
        "# the field names and their struct format: the ws attention's (DECODE_PARAMS), then kv_append's",
        "# (KV_APPEND_PARAMS).",
        "# DECODE_STEP_VEC: the fused rotation's elements per access, by angle source (16-bit elements). A step",
        "# fuses where its append was planned with vectors at least that wide, and for DECODE_STEP_SAME_WIDTH's",
        "# sources (whose arithmetic follows the width) exactly that wide.",
        f"DECODE_STEP_VEC = {_widths(variants)!r}",
        f"DECODE_STEP_SAME_WIDTH = {tuple(a.value for a in SAME_WIDTH_ANGLES)!r}",
        "",
    ]
    lines += params_table_lines("DECODE_STEP_PARAMS", variants, decode_step_params, params_layout_id) + [""]
    return lines + dispatch_map_lines("DECODE_STEP", variants, params_layout_id,
                                   lambda v: keys_by_angle_source(v, v.sources))


FAMILY = OpFamily(
    name="decode_step",
    variant_ops=(DecodeStepVariant.op,),
    enumerate=enumerate_decode_step,
    parse_name=parse_decode_step_name,
    render_headers=render_headers,
    render_module=render_module,
    params=decode_step_params,
    max_threads=threads,
    dispatch_lines=dispatch_lines,
    api={"decode_step": "decode_step_api"},
    reference=("decode_step",),
    tools="cukiln.tools.decode_step",
)
