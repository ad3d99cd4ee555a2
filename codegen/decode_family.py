"""The decode-attention family: its header and modules rendered, its section of the dispatch table, and its entry
points in the runtime and the tools. Its variant space is decode_variants; its ABI and launch knobs decode_abi."""

from __future__ import annotations

from . import decode_abi, jinja
from .abi import TEMPLATE_CTYPE, param_structs
from .axes import Dtype
from .decode_variants import CACHES, FORMS, PAGED_PIPELINES, PIPELINES, DecodeCombineVariant, DecodeMergeVariant, DecodeVariant, enumerate_decode, parse_decode_name
from .family import OpFamily
from .tables import params_table_lines, tuned_rule_lines

HEADER = "decode.cuh"


def render_headers(*, l2_prefetch: str = decode_abi.L2_PREFETCH, warps: int = decode_abi.WARPS,
                   issue_early: bool = decode_abi.ISSUE_EARLY,
                   keys_as_rows: bool = decode_abi.KEYS_AS_ROWS) -> dict[str, str]:
    """decode.cuh, the kernel bodies (keywords other than the defaults are for experiments:
    benchmarks/decode_sweep.py)."""
    return {HEADER: jinja.render("decode.cuh.j2", head_rows=decode_abi.HEAD_ROWS, warps=warps,
                                 row_padding=decode_abi.ROW_PADDING, l2_prefetch=l2_prefetch,
                                 max_cluster_splits=decode_abi.MAX_CLUSTER_SPLITS, issue_early=issue_early,
                                 invariant_splits=decode_abi.INVARIANT_SPLITS,
                                 ws_evict_first=decode_abi.WS_EVICT_FIRST, keys_as_rows=keys_as_rows,
                                 fp8_ring_head_dims=decode_abi.FP8_RING_HEAD_DIMS)}


def render_module(dtype: Dtype, variants: list[DecodeVariant | DecodeCombineVariant], *,
                  warps: int = decode_abi.WARPS, geometry: dict[str, tuple[int, int, int]] | None = None) -> str:
    """The .cu source holding the decode variants ``variants`` (all of element type ``dtype``).
    ``geometry``: attention variant name -> (keys per tile, stages, the launch bound's blocks per
    multiprocessor), by default the variant's pipeline's (decode_abi)."""
    assert all(v.dtype is dtype for v in variants), "one element type per module"
    attention = [v for v in variants if isinstance(v, DecodeVariant)]
    structs, struct_of = param_structs(variants, decode_abi.decode_params, decode_abi.params_layout_id)
    return jinja.render(
        "decode.cu.j2",
        dtype=dtype,
        dtype_ctype=TEMPLATE_CTYPE[dtype],
        variants=variants,
        structs=structs,
        struct_of=struct_of,
        max_threads=32 * warps,
        producers={v.name: decode_abi.producer_warps(v.pipeline, v.paged) for v in attention},
        # the register budget per variant: as many resident blocks as its shared memory allows
        geometry=geometry or {v.name: (v.pipeline.tile_keys, decode_abi.stages(v.head_dim, v.pipeline, v.cache),
                                       decode_abi.min_blocks_per_sm(v.head_dim, v.pipeline, cache=v.cache))
                              for v in attention},
        combine_threads=decode_abi.COMBINE_THREADS,
        merge_threads=decode_abi.MERGE_THREADS,
    )


def _split_rule(rule: dict) -> dict:
    """A tuned split rule as dispatch.py holds it: the measured table as tuples (blocks, T, the best
    pipeline's index in DECODE_PIPELINES, then each pipeline's best split count; hashable, for the
    runtime's cache), or a wave rule's values (tuning files written before the table). Tables measured
    before the pipelines hold (blocks, T, splits): the narrow pipeline, its count taken for every one."""
    if "table" in rule:
        return {"table": tuple(_table_point([int(x) for x in point]) for point in rule["table"])}
    return {k: type(v)(rule[k]) for k, v in decode_abi.SPLIT_DEFAULT.items()}


def _table_point(p: list[int]) -> tuple[int, ...]:
    if len(p) == 3:
        return (p[0], p[1], 0) + (p[2],) * len(PIPELINES)
    if 3 + 1 < len(p) < 3 + len(PIPELINES):  # measured before the later pipelines: the narrow count for them
        p = p + [p[3]] * (3 + len(PIPELINES) - len(p))
    if len(p) != 3 + len(PIPELINES) or not 0 <= p[2] < len(PIPELINES) or min(p[:2] + p[3:]) < 1:
        raise ValueError(f"decode tuning: a table point must be (blocks, T, pipeline index < {len(PIPELINES)}, "
                         f"one split count per pipeline), got {p}")
    return tuple(p)


def _shared(variants: list) -> dict[tuple[int, str, str], int]:
    shapes = sorted({(v.head_dim, v.pipeline, v.cache) for v in variants if isinstance(v, DecodeVariant)},
                    key=lambda s: (s[0], PIPELINES.index(s[1]), CACHES.index(s[2])))
    return {(d, p.value, c.value): decode_abi.shared_bytes(d, p, cache=c) for d, p, c in shapes}


def dispatch_lines(variants: list, tuning: dict[str, dict]) -> list[str]:
    attention = sorted((v for v in variants if isinstance(v, DecodeVariant)), key=lambda v: v.name)
    lines = [
        "# Decode attention. DECODE maps (dtype, head dim, K/V strides, vector width, pipeline, cache, form) to (module,",
        "# symbol, params layout, the module and symbol of the combine kernel that merges split-KV partial results);",
        "# DECODE_PARAMS as",
        "# ROPE_PARAMS. Block: DECODE_WARPS warps serving up to DECODE_HEAD_ROWS query heads of one KV head;",
        "# combine blocks have DECODE_COMBINE_THREADS threads. Pipelines (decode_variants.Pipeline): every",
        "# variant has the first, the bandwidth path all (the split table chooses); DECODE_TILE_KEYS: keys per",
        "# K/V tile of each. DECODE_SHARED: (head dim, pipeline, cache) -> dynamic shared memory bytes of a block.",
        "# DECODE_CACHES: what the caches may hold (the key's sixth axis): q's type (same), or FP8 e4m3 with scales.",
        "# DECODE_FORMS (the key's last axis): fixed-capacity caches, or paged pools through a block table.",
        f"DECODE_HEAD_ROWS = {decode_abi.HEAD_ROWS}",
        f"DECODE_WARPS = {decode_abi.WARPS}",
        f"DECODE_PIPELINES = {tuple(p.value for p in PIPELINES)!r}",
        f"DECODE_TILE_KEYS = {dict((p.value, p.tile_keys) for p in PIPELINES)!r}",
        f"DECODE_COMBINE_THREADS = {decode_abi.COMBINE_THREADS}",
        f"DECODE_CACHES = {tuple(c.value for c in CACHES)!r}",
        f"DECODE_FORMS = {tuple(f.value for f in FORMS)!r}",
        "# the warp-specialized pipelines, which read the caches through TMA tensor maps (sm_90 on)",
        f"DECODE_WARP_SPECIALIZED = {tuple(p.value for p in PIPELINES if p.warp_specialized)!r}",
        "# bytes the L2 fetches around each of their TMA requests (their tensor maps' L2 promotion)",
        f"DECODE_WS_L2_PROMOTION = {decode_abi.WS_L2_PROMOTION}",
        "# the ws pipelines over FP8 caches: query groups of this many heads or fewer (larger ones take narrow)",
        f"DECODE_FP8_WS_MAX_GROUP = {decode_abi.FP8_WS_MAX_GROUP}",
        "# threads of an attention block per pipeline (ws: the computing warps and a producer warp), over fixed caches",
        "# and over paged pools (whose ws_deep kernels have several producer warps)",
        f"DECODE_THREADS = {dict((p.value, decode_abi.block_threads(p)) for p in PIPELINES)!r}",
        f"DECODE_PAGED_THREADS = {dict((p.value, decode_abi.block_threads(p, True)) for p in PAGED_PIPELINES)!r}",
        "# Split-KV from sm_90 on: at most this many splits of a (row, KV head) merge within a cluster.",
        f"DECODE_MAX_CLUSTER_SPLITS = {decode_abi.MAX_CLUSTER_SPLITS}",
        "# batch-invariant mode: (most keys of a row or None, its split count), first match",
        f"DECODE_INVARIANT_SPLITS = {decode_abi.INVARIANT_SPLITS!r}",
        f"DECODE_SHARED = {_shared(variants)!r}",
        "",
    ]
    lines += params_table_lines("DECODE_PARAMS", variants, decode_abi.decode_params, decode_abi.params_layout_id)
    lines += [
        "",
        "# Split-KV (runtime/decode_plan.choose_pipeline; one split means one pass). Per arch, from",
        "# generated/tuning/<target>.json (`cukiln tune decode`; a GPU's own, else its arch's): a table of measured points (blocks, T, the best",
        "# pipeline's index, each pipeline's best split count): the nearest point's pipeline (narrow where a",
        "# call has no such variant) and that pipeline's total of blocks, shared out. Other archs: the least split count",
        "# whose waves of blocks (blocks_per_sm per multiprocessor at most) reach wave_efficiency of the best,",
        "# keeping at least min_keys_per_split keys per split.",
        f"DECODE_SPLIT_DEFAULT = {decode_abi.SPLIT_DEFAULT!r}",
        "DECODE_SPLIT = {",
    ]
    lines += tuned_rule_lines(tuning, "decode", _split_rule)
    lines += ["}"]
    for rule, (name, what) in OWN_TABLES.items():
        lines += [f"# {what}' table (`cukiln tune {rule}`: their kernels' own pipelines and split counts, points as",
                  "# DECODE_SPLIT's); a GPU or arch without one takes DECODE_SPLIT's", f"{name} = {{"]
        lines += tuned_rule_lines(tuning, rule, _split_rule)
        lines += ["}"]
    lines += ["",
              "# cukiln.merge_attention: dtype -> (module, symbol, params layout); DECODE_MERGE_THREADS a block",
              f"DECODE_MERGE_THREADS = {decode_abi.MERGE_THREADS}",
              "DECODE_MERGE = {"]
    lines += [f"    {v.dtype.value!r}: ({v.module!r}, {v.name!r}, {decode_abi.params_layout_id(v)!r}),"
              for v in variants if isinstance(v, DecodeMergeVariant)]
    lines += ["}", "", "DECODE = {"]
    lines += [f"    {v.key!r}: ({v.module!r}, {v.name!r}, {decode_abi.params_layout_id(v)!r}, {v.combine.module!r}, "
              f"{v.combine.name!r}),"
              for v in attention]
    return lines + ["}"]


# The split tables of the calls whose kernels `cukiln tune decode` does not time: rule -> (dispatch name, whose)
OWN_TABLES = {"decode-fp8": ("DECODE_SPLIT_FP8", "FP8 caches"),
              "decode-paged": ("DECODE_SPLIT_PAGED", "paged pools")}
_TUNED_SETTINGS = {"ws_l2_promotion": decode_abi.WS_L2_PROMOTION}

FAMILY = OpFamily(
    name="decode",
    variant_ops=(DecodeVariant.op, DecodeCombineVariant.op, DecodeMergeVariant.op),
    enumerate=enumerate_decode,
    parse_name=parse_decode_name,
    render_headers=render_headers,
    render_module=render_module,
    params=decode_abi.decode_params,
    max_threads=decode_abi.max_threads,
    dispatch_lines=dispatch_lines,
    # the kernels `cukiln tune decode` times (bf16, head dim 128, 16-byte rows: each pipeline, and the combine), and
    # `cukiln tune decode-fp8` / `decode-paged` (the same over e4m3 caches / paged pools); the step's kernels take the
    # first table's choices
    tuned_kernels={"decode": r"^decode_(bf16_d128_s3_v8(_deep|_wide|_ws|_ws_deep)?|combine_bf16_d128)$",
                   "decode-fp8": r"^decode_(bf16_d128_s3_v16(_ws)?_e4m3|combine_bf16_d128)$",
                   "decode-paged": r"^decode_(bf16_d128_s3_v8(_ws_deep)?_paged|combine_bf16_d128)$"},
    tuned_settings={rule: _TUNED_SETTINGS for rule in ("decode", *OWN_TABLES)},
    api={"decode_attention": "decode_api", "merge_attention": "merge_api"},
    reference=("decode_attention", "merge_attention"),
    tools="cukiln.tools.decode",
)
