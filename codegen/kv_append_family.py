"""The KV-cache append family (``kv_append``): one launch rotates each row's new query and key tokens and writes the
rotated keys and the values into fixed-capacity caches at the row's current length. Its variant space, parameter
struct, modules and section of the dispatch table; the rotation itself is RoPE's (rope.cuh), so every angle source
and pairing of cukiln.rope serves here too.

A variant is (dtype, pairing, angle source, vector width, QK-norm), its angle source any (Angles.ANY): one kernel takes
each source, picked at run time, where a kernel per source made the family's build about four times the work for an
append that reads a few cos|sin values a token. Every tensor's last dim is contiguous and its other strides are kernel
arguments (the caches are slices of larger buffers, bhsd or bshd alike). The QK-norm
variants (a per-head RMSNorm of q and k before the rotation) are modules of their own, so that the plain kernels
compile exactly as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from . import decode_abi, jinja, rope_abi
from .abi import CPTR, F64, I64, PTR, TEMPLATE_CTYPE, Params, param_structs
from .axes import VECTOR_WIDTHS, AxisRecord, Dtype, alternatives, first_rejection, rule_vector_fits_16_bytes
from .family import OpFamily
from .rope_family import ANGLE_SOURCES
from .rope_variants import SOURCES, Angles, Pairing
from .tables import dispatch_map_lines, keys_by_angle_source, params_table_lines

HEADER = "kv_append.cuh"
# Threads a block at most, and the launch bound's blocks per multiprocessor: 2 blocks of 192 (170 registers a
# thread). At 3 blocks of 256 (80 registers) six variants spilled 4-68 bytes on sm_90 (the cache rows' and the lengths'
# addressing beside the rotation's); at 2 of 256 (128 registers) the interleaved bf16 kernel of 16-byte vectors that
# takes every angle source spilled 16 (148-156 registers without the bound), and the paged step's attention after the
# append ran no faster (docs/performance.md, the decode step). A decode step's append is a few blocks anyway, and one
# token's q and k heads (40 rows of 8 pairs for Llama-3-8B) fill 160 threads.
MAX_THREADS_PER_BLOCK = 192
MIN_BLOCKS_PER_SM = 2
# QK-norm variants: 1 (255 registers); at 2, the interleaved cos|sin-cache kernel of 8-element vectors spilled 8 bytes
# on sm_90 (the weights' and the inverse RMS's reads beside the rotation).
MIN_BLOCKS_PER_SM_QK_NORM = 1


@dataclass(frozen=True, order=True)
class KvAppendVariant(AxisRecord):
    """One compiled cache-append kernel: each field is a compile-time axis."""

    dtype: Dtype
    pairing: Pairing
    angles: Angles
    vec: int  # elements per load/store
    qk_norm: bool = False  # q's and k's heads RMS-normalized (weights per feature) before the rotation

    op = "kv_append"

    @property
    def name(self) -> str:
        return f"kv_append_{self.dtype.value}_{self.pairing.value}_{self.angles.value}_v{self.vec}{_norm_suffix(self)}"

    @property
    def module(self) -> str:
        return f"{self.op}_{self.dtype.value}{_norm_suffix(self)}"


def _norm_suffix(v: KvAppendVariant) -> str:
    return "_qknorm" if v.qk_norm else ""


def rule_caches_are_half_types(v: KvAppendVariant) -> str | None:
    # the caches decode_attention reads: fp16 or bf16
    if v.dtype is Dtype.FP32:
        return "the KV caches (what decode_attention reads) are fp16 or bf16"
    return None


def rule_angle_source_at_run_time(v: KvAppendVariant) -> str | None:
    if v.angles is not Angles.ANY:
        return "kv_append takes its angle source at run time (angles=any)"
    return None


RULES = (rule_caches_are_half_types, rule_vector_fits_16_bytes, rule_angle_source_at_run_time)


def rejection(v: KvAppendVariant) -> str | None:
    return first_rejection(RULES, v)


def enumerate_kv_append() -> Iterator[KvAppendVariant]:
    for dtype in Dtype:
        for pairing in Pairing:
            for angles in Angles:
                for vec in VECTOR_WIDTHS:
                    for qk_norm in (False, True):
                        v = KvAppendVariant(dtype, pairing, angles, vec, qk_norm)
                        if rejection(v) is None:
                            yield v


_NAME_RE = re.compile(rf"^kv_append_(?P<dtype>{alternatives(Dtype)})_(?P<pairing>{alternatives(Pairing)})"
                      rf"_(?P<angles>{alternatives(Angles)})_v(?P<vec>\d+)(?P<qk_norm>_qknorm)?$")


def parse_kv_append_name(name: str) -> KvAppendVariant:
    m = _NAME_RE.match(name)
    if m is None:
        raise ValueError(f"not a kv_append variant name: {name!r}")
    v = KvAppendVariant(Dtype(m["dtype"]), Pairing(m["pairing"]), Angles(m["angles"]), int(m["vec"]),
                        m["qk_norm"] is not None)
    if v.vec not in VECTOR_WIDTHS:
        raise ValueError(f"{name!r}: vector width must be one of {VECTOR_WIDTHS}")
    reason = rejection(v)
    if reason is not None:
        raise ValueError(f"{name!r} names a pruned combination: {reason}")
    return v


# --- the parameter struct ------------------------------------------------------------------------------------
_TENSORS = ("q", "q_out", "k", "v", "k_cache", "v_cache")  # each with (b, s, h) strides; s: new token or slot
_FIELDS = (
    (CPTR, "q"), (PTR, "q_out"), (CPTR, "k"), (CPTR, "v"), (PTR, "k_cache"), (PTR, "v_cache"),
    (I64, "batch"), (I64, "new_tokens"),  # rows, and new tokens per row
    (I64, "heads_q"), (I64, "heads_kv"), (I64, "head_dim"), (I64, "rotary_dim"), (I64, "rotary_offset"),
    (I64, "capacity"),  # cache slots per row
    (I64, "copy_tail"),  # the features outside the rotated span are copied (to q_out and the key cache)
    (F64, "mscale"),
    (CPTR, "kv_lens"), (I64, "kv_len_value"),  # each row's length before the append (a tensor, or one int)
    (PTR, "kv_lens_out"),  # where each row's length after the append goes (int32 [b]; null: nowhere)
    (CPTR, "kv_start"), (I64, "kv_start_value"),  # each row's first valid slot (left padding)
    (CPTR, "positions"), (I64, "pos_stride_b"), (I64, "pos_stride_s"), (I64, "positions_int64"),
) + tuple((I64, f"{t}_{a}") for t in _TENSORS for a in ("sb", "ss", "sh"))
# FP8 caches (1: the caches hold e4m3 bytes, written quantized by these scales, as decode's FP8 fields); last, so that
# the fused decode step's struct (the attention's, then these) keeps every other field where it was
_FP8_FIELDS = ((I64, "cache_fp8"),) + decode_abi.FP8_SCALES


# QK-norm variants: each tensor's weights [head_dim] (null: that tensor not normalized), fp32 or q's type
# Paged caches: decode's block-table fields (the cache strides then the pool's: page, slot, head) and vLLM's flat slot
# per new token (int64 [b * n], or null), either one set, at the struct's end as the FP8 fields (the fused step's struct
# keeps its offsets)
_PAGE_FIELDS = decode_abi.PAGE_TABLE + ((CPTR, "slot_mapping"),)
_NORM_FIELDS = ((CPTR, "q_norm_weight"), (CPTR, "k_norm_weight"), (I64, "norm_weight_fp32"), (F64, "norm_eps"))


def kv_append_params(v: KvAppendVariant) -> Params:
    """(C type, field name) of every kernel parameter of ``v``, in struct order."""
    return _FIELDS + (_NORM_FIELDS if v.qk_norm else ()) + rope_abi.ANGLE_FIELDS[v.angles] + _FP8_FIELDS + _PAGE_FIELDS


def params_layout_id(v: KvAppendVariant) -> str:
    return v.angles.value + _norm_suffix(v)


# --- rendering and the dispatch table --------------------------------------------------------------------------
def render_headers() -> dict[str, str]:
    return {HEADER: jinja.render("kv_append.cuh.j2")}


def render_module(dtype: Dtype, variants: list[KvAppendVariant]) -> str:
    assert all(v.module == variants[0].module for v in variants), "one element type and QK-norm per module"
    structs, struct_of = param_structs(variants, kv_append_params, params_layout_id)
    return jinja.render("kv_append.cu.j2", dtype=dtype, dtype_ctype=TEMPLATE_CTYPE[dtype], variants=variants,
                        structs=structs, struct_of=struct_of, max_threads=MAX_THREADS_PER_BLOCK,
                        angle_sources=ANGLE_SOURCES,
                        min_blocks={v.name: MIN_BLOCKS_PER_SM_QK_NORM if v.qk_norm else MIN_BLOCKS_PER_SM
                                    for v in variants})


def dispatch_lines(variants: list[KvAppendVariant], tuning: dict[str, dict]) -> list[str]:
    lines = [
        "# KV-cache append. KV_APPEND maps (dtype, pairing, angle source, vector width, QK-norm) to (module, symbol,",
        "# params layout); KV_APPEND_PARAMS maps a params layout to the field names and their struct format.",
        f"KV_APPEND_MAX_THREADS = {MAX_THREADS_PER_BLOCK}",
        "",
    ]
    lines += params_table_lines("KV_APPEND_PARAMS", variants, kv_append_params, params_layout_id) + [""]
    return lines + dispatch_map_lines("KV_APPEND", variants, params_layout_id,
                                   lambda v: keys_by_angle_source(v, SOURCES))


FAMILY = OpFamily(
    name="kv_append",
    variant_ops=(KvAppendVariant.op,),
    enumerate=enumerate_kv_append,
    parse_name=parse_kv_append_name,
    render_headers=render_headers,
    render_module=render_module,
    params=kv_append_params,
    max_threads=lambda v: MAX_THREADS_PER_BLOCK,
    dispatch_lines=dispatch_lines,
    # decode_step: the append then decode_attention (runtime/decode_step_api.py), this family's user-facing step
    api={"kv_append": "kv_append_api", "kv_scales": "fp8_scales", "block_table": "paged_tables"},
    reference=("kv_append",),
    tools="cukiln.tools.kv_append",
)
