"""The RoPE family: its headers and modules rendered, its section of the dispatch table, and its entry points in
the runtime and the tools. Its variant space is rope_variants; its ABI and launch knobs rope_abi."""

from __future__ import annotations

from . import jinja, rope_abi
from .abi import F64, TEMPLATE_CTYPE, param_structs
from .axes import Dtype
from .family import OpFamily
from .rope_variants import SOURCES, Angles, RopeVariant, enumerate_rope, parse_rope_name, sources_served
from .tables import dispatch_map_lines, keys_by_angle_source, params_table_lines, tuned_rule_lines

HEADER = "rope.cuh"
# The angle sources in angle_kind's order, as the templates name them (rope.cuh's AnyAngles, angles.j2)
ANGLE_SOURCES = [a.value for a in SOURCES]


def render_headers(*, heads_in_flight: int = rope_abi.HEADS_IN_FLIGHT,
                   streaming: bool = rope_abi.STREAMING) -> dict[str, str]:
    """rope.cuh, the kernel body (keywords other than the defaults are for experiments: benchmarks/rope_sweep.py)."""
    return {HEADER: jinja.render("rope.cuh.j2", heads_in_flight=heads_in_flight, streaming=streaming,
                                 angle_sources=ANGLE_SOURCES)}


def render_module(dtype: Dtype, variants: list[RopeVariant], *, min_blocks: int | None = None,
                  max_threads: int = rope_abi.MAX_THREADS_PER_BLOCK) -> str:
    """The .cu source holding every variant of ``variants`` (all of element type ``dtype``); ``min_blocks``
    replaces every variant's launch bound (rope_abi.min_blocks_per_sm), for experiments."""
    assert all(v.dtype is dtype for v in variants), "one element type per module"
    structs, struct_of = param_structs(variants, rope_abi.rope_params, rope_abi.params_layout_id)
    return jinja.render("rope.cu.j2", dtype=dtype, dtype_ctype=TEMPLATE_CTYPE[dtype], variants=variants,
                        structs=structs, struct_of=struct_of, max_threads=max_threads, angle_sources=ANGLE_SOURCES,
                        min_blocks={v.name: min_blocks or rope_abi.min_blocks_per_sm(v) for v in variants})


def dispatch_lines(variants: list[RopeVariant], tuning: dict[str, dict]) -> list[str]:
    """ROPE (dispatch key -> module, symbol, params layout), ROPE_PARAMS, the launch-shape constants and the
    tuned rules (dense launch choices, thd token/grid) per arch."""
    lines = [
        "# RoPE. ROPE maps a dispatch key to (module, symbol, params layout); ROPE_PARAMS maps a params layout",
        "# to the kernel-parameter field names and their struct format (every field 8 bytes).",
        "# Key: (dtype, layout, pairing, angles, strides, vector width, dispatch, tensors: 2 for rope_qk's one",
        "# launch, M-RoPE's three positions a token); the direction, the rotated span's offset, k's head count and",
        "# M-RoPE's sections are kernel arguments. A kernel taking its angle source at run time (angles=any) serves",
        "# the key of each source it takes.",
        "# ANGLE_KINDS: each angle source's angle_kind, the field by which a kernel of any source (RoPE's, the",
        "# append's, the step's) picks it; ANY_ANGLE_FIELDS: such a kernel's fields of every source, zero (a call sets",
        "# its own source's).",
        "# Launch shape: threads per block, and heads whose loads a thread issues before its first store.",
        f"ROPE_MAX_THREADS = {rope_abi.MAX_THREADS_PER_BLOCK}",
        f"ROPE_HEADS_IN_FLIGHT = {rope_abi.HEADS_IN_FLIGHT}",
        f"ANGLE_KINDS = {dict((a.value, i) for i, a in enumerate(SOURCES))!r}",
        f"ANY_ANGLE_FIELDS = {_any_angle_zeros()!r}",
        "",
    ]
    lines += params_table_lines("ROPE_PARAMS", variants, rope_abi.rope_params, rope_abi.params_layout_id) + [""]
    lines += [
        "# Dense launch choices: vectors of at most max_vector_bytes, the stride-free kernel for packed tensors",
        "# when packed_kernel, min_threads to max_threads threads per block, head rows for head_passes passes of a",
        "# thread over a token's heads (one 16-bit tensor rotated over the whole head). Per GPU or arch, from",
        "# generated/tuning/<target>.json, a GPU's own or its arch's: `cukiln tune rope`; thd keeps the default.",
        f"ROPE_LAUNCH_DEFAULT = {rope_abi.LAUNCH_DEFAULT!r}",
        "ROPE_LAUNCH = {",
    ]
    lines += tuned_rule_lines(tuning, "rope", lambda rule: {k: type(v)(rule.get(k, v))
                                                             for k, v in rope_abi.LAUNCH_DEFAULT.items()})
    lines += [
        "}",
        "",
        "# thd: grid dispatch when sequences x blocks of the longest sequence <= this many times the token",
        "# dispatch's blocks (per GPU or arch, from generated/tuning/<target>.json: `cukiln tune rope-thd`); else token.",
        f"ROPE_THD_GRID_MAX_WASTE_DEFAULT = {rope_abi.THD_GRID_MAX_WASTE_DEFAULT!r}",
        "ROPE_THD_GRID_MAX_WASTE = {",
    ]
    lines += tuned_rule_lines(tuning, "rope-thd", lambda rule: float(rule["grid_max_waste"]))
    return lines + ["}", ""] + dispatch_map_lines("ROPE", variants, rope_abi.params_layout_id,
                                                  lambda v: keys_by_angle_source(v, sources_served(v)))


def _any_angle_zeros() -> dict:
    return {f: 0.0 if c == F64 else 0 for c, f in rope_abi.ANGLE_FIELDS[Angles.ANY] if f != "angle_kind"}


FAMILY = OpFamily(
    name="rope",
    variant_ops=(RopeVariant.op,),
    enumerate=enumerate_rope,
    parse_name=parse_rope_name,
    render_headers=render_headers,
    render_module=render_module,
    params=rope_abi.rope_params,
    max_threads=lambda v: rope_abi.MAX_THREADS_PER_BLOCK,
    dispatch_lines=dispatch_lines,
    # the kernels `cukiln tune rope` and `cukiln tune rope-thd` time: freqs angles, 16-byte accesses; dense single
    # tensors in each dtype, packed bf16 tokens by either dispatch
    tuned_kernels={"rope": r"^rope_((bf16|fp16)_dense_half_freqs_s\d_v8|fp32_dense_half_freqs_s\d_v4)$",
                   "rope-thd": r"^rope_bf16_thd_half_freqs_s\d_v8_(token|grid)$"},
    api={"rope": "rope_api", "rope_qk": "rope_api", "rope_recipe": "rope_recipes", "Rotary": "rotary"},
    reference=("rope", "rope_qk"),
    tools="cukiln.tools.rope",
)
