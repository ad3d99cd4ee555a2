"""Decode-attention call planning: validate, pick the variant and the split count, fill the parameters.

Works on TensorInfo metadata alone (no framework, no GPU), so every rule here is tested on the CPU.
Bad input raises ValueError or TypeError naming the argument, the expectation and the given value,
before anything is launched. Output, log-sum-exp and split workspace pointers are filled in by the
caller once it has allocated them (``DecodePlan.values``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from cukiln.core.archs import clusters, programmatic_launch, tensor_maps, tuned
from cukiln.generated import dispatch

from .tensors import TensorInfo, device_name

DTYPES = ("fp16", "bf16")
KV_LAYOUTS = ("bhsd", "bshd")
SAME, FP8 = dispatch.DECODE_CACHES  # what the caches hold: q's type, or FP8 e4m3 with scales
FIXED, PAGED = dispatch.DECODE_FORMS  # fixed-capacity caches, or pools of pages through a block table
FP8_HEAD_DIMS = sorted({key[1] for key in dispatch.DECODE if key[5] == FP8})
# The FP8 and paged kernels copy K/V in 16 bytes (their variants' one vector width): such caches' rows and pointer on
# 16-byte boundaries (copy_rows)
COPY_BYTES = 16
HEAD_DIMS = sorted({key[1] for key in dispatch.DECODE})
GRID_YZ_MAX = 65535  # CUDA's limit on gridDim.y and gridDim.z: KV heads x head groups, and rows
INT32_MAX = 2**31 - 1
MAX_SPLITS = 65536
# The kernel splits a row's key range in 32-bit arithmetic: positions + splits must stay below 2**31.
MAX_CAPACITY = INT32_MAX - MAX_SPLITS
# Split-KV from sm_90 on: up to this many splits of a (row, KV head) run as one thread-block cluster and
# merge their results in distributed shared memory (no combine kernel); more splits use the combine kernel.
MAX_CLUSTER_SPLITS = dispatch.DECODE_MAX_CLUSTER_SPLITS
# K/V pipelines (decode_variants.Pipeline): every variant has the first (narrow), the bandwidth path all.
PIPELINES = dispatch.DECODE_PIPELINES
NARROW = PIPELINES[0]
WS = "ws"  # warp-specialized: a producer warp loads K/V through tensor maps (sm_90 on)
WS_DEEP = "ws_deep"
WARP_SPECIALIZED = dispatch.DECODE_WARP_SPECIALIZED  # ws, and ws_deep (a deeper ring, one block a multiprocessor)
TILE_KEYS = dispatch.DECODE_TILE_KEYS
MAP_FIELDS = ("k_map", "v_map")  # the ws kernels' tensor maps of the K and V caches (decode_abi._TENSOR_MAPS)
PIPELINE_ENV = "CUKILN_DECODE_PIPELINE"  # a pipeline's name forces it (checks, measurements); auto: the table's
# Keys a split keeps at least (one narrow tile; split_from_table takes the chosen pipeline's tile), as in the
# ladder `cukiln tune decode` measures.
MIN_KEYS_PER_SPLIT = TILE_KEYS[NARROW]
FAST_PIPELINES_MAX_HEAD_DIM = max((key[1] for key in dispatch.DECODE if key[4] != NARROW and key[5] == SAME),
                                  default=0)
# Batch-invariant mode: each row split by its own key count (this rule, the kernel's), over these pipelines in
# order of preference, whose tiles are alike (the splits' key ranges and their arithmetic do not depend on which).
INVARIANT_SPLITS = dispatch.DECODE_INVARIANT_SPLITS
INVARIANT_PIPELINES = tuple(p for p in (WS, "deep", NARROW) if TILE_KEYS[p] == TILE_KEYS[NARROW])


@dataclass(frozen=True)
class Launch:
    module: str
    symbol: str
    fmt: str
    field_names: tuple[str, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    overlap_previous: bool = False  # may start before the previous kernel ends (programmatic launch)
    cluster: int = 1  # blocks per thread-block cluster, along x


@dataclass(frozen=True)
class DecodePlan:
    key: tuple  # (dtype, head dim, K/V strides, vector width, pipeline, cache, form)
    device: int
    batch: int
    heads_q: int
    head_dim: int
    num_splits: int
    attention: Launch
    combine: Launch | None
    tokens: int = 1  # query tokens a cache row: batch is the query rows, cache rows x tokens
    fields: dict = field(default_factory=dict)  # every parameter except the ones values() takes

    @property
    def reads_tensor_maps(self) -> bool:
        """Whether the attention kernel reads the caches through TMA tensor maps (decode_api encodes them per call): its
        parameters hold them (codegen's decode_abi.reads_tensor_maps decides)."""
        return MAP_FIELDS[0] in self.attention.field_names

    @property
    def pipeline(self) -> str:
        return self.key[4]

    def values(self, *, out: int, lse: int, partial_out: int = 0, partial_lse: int = 0) -> tuple[tuple, tuple]:
        """(attention values, combine values) with the output, lse and workspace pointers filled in; a ws plan's
        tensor maps are zeros here (they need the driver: decode_api.launch_values fills them)."""
        given = {**self.fields, "out": out, "lse": lse, "partial_out": partial_out, "partial_lse": partial_lse}
        attention = tuple(given[name] for name in self.attention.field_names)
        combine = () if self.combine is None else tuple(given[name] for name in self.combine.field_names)
        return attention, combine


def _describe(t: TensorInfo) -> str:
    return f"shape {t.shape}, dtype {t.dtype}"


# Query tokens a row the decode serves (speculative verification, multi-token prediction): a block packs a row's tokens
# x the group's heads, so the keys are read once for them all; past this, a step is a prefill's
MAX_QUERY_TOKENS = 16


def query_tokens(q: TensorInfo, name: str = "q") -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """q as query rows [b x n, h_q, d] (sizes and strides) and n, each cache row's query tokens: n = 1 for q's
    one-token forms (query_rows), n for [b, n, h_q, d] (n > 1 and h_q > 1: several query tokens a row, rows and tokens
    mergeable, the row stride n times the token stride)."""
    if q.ndim == 4 and q.shape[1] > 1 and q.shape[2] > 1:
        b, n, h, d = q.shape
        sb, sn, sh, sd = q.strides
        if n > MAX_QUERY_TOKENS:
            raise ValueError(f"{name}: at most {MAX_QUERY_TOKENS} query tokens a row ([b, n, h_q, d]), got n = {n}")
        if b > 1 and sb != n * sn:
            raise ValueError(f"{name}: [b, n, h_q, d] with its rows and tokens mergeable (row stride = n x token "
                             f"stride), got strides {list(q.strides)}; pass {name}.contiguous()")
        return (b * n, h, d), (sn, sh, sd), n
    return (*query_rows(q), 1)


def query_rows(q: TensorInfo) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """q as [b, h_q, d]: [b, h, d] itself, or [b, 1, h, d] / [b, h, 1, d] without the query axis."""
    if q.ndim == 3:
        return q.shape, q.strides
    if q.ndim == 4 and (q.shape[1] == 1 or q.shape[2] == 1):
        drop = 1 if q.shape[1] == 1 else 2
        keep = [i for i in range(4) if i != drop]
        return tuple(q.shape[i] for i in keep), tuple(q.strides[i] for i in keep)
    raise ValueError(f"q: expected [b, h_q, d], [b, 1, h_q, d] or [b, h_q, 1, d] (one query token per row), or "
                     f"[b, n, h_q, d] (n query tokens a row), "
                     f"got {_describe(q)}")


def cache_rows(t: TensorInfo, name: str, layout: str,
               paged: bool = False) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """A K or V cache as (b, h_kv, T, d) sizes and strides, whatever its layout; a paged pool (``paged``) as (pages,
    h_kv, page size, d)."""
    if t.ndim != 4:
        expected = ("a 4-d pool of pages [pages, h_kv, page_size, d] (bhsd: HND) or [pages, page_size, h_kv, d] (bshd: "
                    "NHD)" if paged else "a 4-d cache [b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd)")
        raise ValueError(f"{name}: expected {expected}, got {_describe(t)}")
    order = (0, 1, 2, 3) if layout == "bhsd" else (0, 2, 1, 3)
    return tuple(t.shape[i] for i in order), tuple(t.strides[i] for i in order)


def rows_copy(t: TensorInfo, strides) -> bool:
    """Whether a cache (its (b, h, T, d) ``strides``) has a contiguous head dim and its pointer and rows on COPY_BYTES
    boundaries: what the kernels that copy 16-byte pieces of rows read."""
    return strides[3] == 1 and t.ptr % COPY_BYTES == 0 and all(s * t.itemsize % COPY_BYTES == 0 for s in strides[:3])


def copy_rows(name: str, t: TensorInfo, strides, what: str) -> None:
    """ValueError naming ``name`` unless the cache's rows copy (rows_copy), as the kernels of ``what`` copy them."""
    if not rows_copy(t, strides):
        raise ValueError(f"{name}: {what} needs a contiguous head dim and its pointer and rows on {COPY_BYTES}-byte "
                         f"boundaries, got strides {list(t.strides)}")


def page_table(block_table: TensorInfo, batch: int, page_size: int, num_pages: int, device: int,
               pools: tuple[tuple[str, TensorInfo, tuple[int, ...]], ...]) -> tuple[int, dict]:
    """(capacity, kernel fields) of a paged call: the block table (int32 [b, max_pages] on q's device, its last axis
    contiguous) and the pools ((name, tensor, (pages, head, slot, dim) strides) each), checked (ValueError/TypeError
    naming the argument): a power-of-two page size, rows of whole 16-byte copies. A row's keys run to max_pages x
    page_size."""
    if not isinstance(block_table, TensorInfo):
        raise TypeError(f"block_table: expected an int32 tensor [b, max_pages] or None, got "
                        f"{type(block_table).__name__}")
    if block_table.dtype != "int32":
        raise TypeError(f"block_table: expected an int32 tensor, got dtype {block_table.dtype}")
    if block_table.ndim != 2 or block_table.shape[0] != batch:
        raise ValueError(f"block_table: expected shape [{batch}, max_pages] (a row of page indices per batch row), "
                         f"got {list(block_table.shape)}")
    if block_table.shape[1] > 1 and block_table.strides[1] != 1:
        raise ValueError(f"block_table: expected its last axis contiguous (stride 1), got strides "
                         f"{list(block_table.strides)}")
    if block_table.device != device:
        raise ValueError(f"block_table: expected a tensor on {device_name(device)} (q's device), got one on "
                         f"{device_name(block_table.device)}")
    for name, t, st in pools:
        copy_rows(name, t, st, "a paged pool")
    capacity = block_table.shape[1] * page_size
    return capacity, {**pool_fields(page_size, num_pages), "block_table": block_table.ptr,
                      "table_sb": block_table.strides[0] if batch > 1 else 0}


def pool_fields(page_size: int, num_pages: int) -> dict:
    """The kernel fields of a paged pool's geometry (its page size as a shift), checked: a power-of-two page size, at
    most INT32_MAX pages."""
    if page_size < 1 or page_size & (page_size - 1):
        raise ValueError(f"k_cache: a page size (the pool's slot axis) must be a power of two, got {page_size}")
    if num_pages > INT32_MAX:
        raise ValueError(f"k_cache: at most {INT32_MAX} pages, got {num_pages}")
    return {"block_table": 0, "table_sb": 0, "page_shift": page_size.bit_length() - 1, "num_pages": num_pages}


def choose_splits(blocks: int, keys: int, sms: int, rule: dict, resident: int | None = None) -> int:
    """The wave rule's split count for a launch of ``blocks`` blocks (one pass) over a cache slice of ``keys``
    positions (per-row lengths live on the device; T bounds them), for GPUs without a tuned table
    (choose_pipeline takes the table where there is one).

    The GPU runs blocks in waves of ``slots`` = sms x min(rule["blocks_per_sm"],
    ``resident``, the blocks a multiprocessor holds); a last wave that is mostly empty wastes the time
    of a whole one. Among split counts that keep rule["min_keys_per_split"] keys per split, the least
    whose wave efficiency (waves / whole waves started) reaches rule["wave_efficiency"] of the best wins.
    """
    per_sm = rule["blocks_per_sm"] if resident is None else min(rule["blocks_per_sm"], resident)
    return _choose_splits(blocks, keys, max(1.0, sms * per_sm), rule["min_keys_per_split"], rule["wave_efficiency"])


@functools.lru_cache(maxsize=4096)
def _choose_splits(blocks: int, keys: int, slots: float, min_keys: int, wave_efficiency: float) -> int:
    # Cached: the search below visits up to a few hundred counts (~70 us of Python at b = 1), and a
    # decode loop asks the same question on every step.
    # Beyond four waves' worth of blocks, splitting gains no efficiency worth its partial results.
    most = min(keys // min_keys, MAX_SPLITS, max(1, math.ceil(4 * slots / max(blocks, 1))))
    if blocks <= 0 or most < 2:
        return 1

    def efficiency(s: int) -> float:
        waves = blocks * s / slots
        return waves / math.ceil(waves)

    # The kernel rounds each split's share up to whole tiles: only counts that differ in effect compete.
    counts = sorted({effective_splits(keys, s) for s in range(1, most + 1)})
    best = max(efficiency(s) for s in counts)
    return next(s for s in counts if efficiency(s) >= wave_efficiency * best)


def choose_pipeline(blocks: int, keys: int, sms: int, rule: dict, resident: int | None = None,
                    available: tuple[str, ...] = PIPELINES, pipeline: str | None = None) -> tuple[int, str]:
    """(split count, pipeline) for a launch of ``blocks`` blocks over ``keys`` cache positions.

    A tuned table chooses both (split_from_table) among the ``available`` pipelines (those the call has
    a variant of). Without one, the narrow pipeline and the wave rule (choose_splits). ``pipeline`` forces
    the pipeline; the split count is then the table's best for it (without a table, the wave rule's, which
    counts narrow tiles and resident blocks: a forced pipeline there is for checks, not for speed).
    """
    if "table" in rule:
        return split_from_table(blocks, keys, rule["table"], pipeline, available)
    return choose_splits(blocks, keys, sms, rule, resident), pipeline or NARROW


@functools.lru_cache(maxsize=4096)
def split_from_table(blocks: int, keys: int, table: tuple[tuple[int, ...], ...], pipeline: str | None = None,
                     available: tuple[str, ...] = PIPELINES) -> tuple[int, str]:
    """(split count, pipeline) for ``blocks`` blocks over ``keys`` keys from measured points (blocks, keys,
    the best pipeline's index in PIPELINES, then each pipeline's best split count): the nearest point's
    pipeline (``pipeline`` given: that one; not ``available``: narrow) and that pipeline's best total of
    blocks (blocks x splits) shared out over ``blocks``, each split at least one tile of keys, counted as
    the kernel shares keys out (effective_splits)."""
    if blocks <= 0 or keys <= 0 or not table:
        return 1, pipeline or NARROW
    point = min(table, key=lambda p: (math.log2(blocks / p[0]) ** 2 + math.log2(keys / p[1]) ** 2, p))
    tuned_blocks, best = point[0], PIPELINES[point[2]]
    pipeline = pipeline or stand_in(best, available)
    tile = TILE_KEYS[pipeline]
    splits = round(point[3 + PIPELINES.index(pipeline)] * tuned_blocks / blocks)
    return effective_splits(keys, max(1, min(splits, keys // tile, MAX_SPLITS)), tile), pipeline


def stand_in(best: str, available: tuple[str, ...]) -> str:
    """The pipeline a call takes where the table picks ``best``: itself where the call has a variant of it, else the other
    warp-specialized one for a warp-specialized choice (paged pools have ws_deep alone), else narrow."""
    if best in available:
        return best
    if best in WARP_SPECIALIZED:
        return next((p for p in WARP_SPECIALIZED if p in available), NARROW)
    return NARROW


def effective_splits(keys: int, splits: int, tile: int = MIN_KEYS_PER_SPLIT) -> int:
    """Splits that get keys when ``keys`` are shared out as the kernel does: ceil(keys / splits) rounded
    up to whole tiles of ``tile`` keys."""
    per_split = -(-(-(-keys // splits)) // tile) * tile
    return max(1, -(-keys // per_split))


def invariant_splits(keys: int) -> int:
    """The split count of a row of ``keys`` keys in batch-invariant mode (the kernel's rule)."""
    return next(n for most, n in INVARIANT_SPLITS if most is None or keys <= most)


def split_rule(target: str | None, cache: str = SAME, form: str = FIXED) -> dict:
    """The split rule measured for ``target`` (a tuning target, or an arch: core.archs.tuned), else the default; for
    FP8 caches or paged pools the table measured for them where there is one (FP8 pages: FP8's)."""
    own = dispatch.DECODE_SPLIT_FP8 if cache == FP8 else dispatch.DECODE_SPLIT_PAGED if form == PAGED else {}
    rule = tuned(own, target, None)
    return rule if rule is not None else tuned(dispatch.DECODE_SPLIT, target, dispatch.DECODE_SPLIT_DEFAULT)


def length_argument(value, name: str, batch: int, device: int) -> tuple[int, int, TensorInfo | None]:
    """(pointer, scalar, tensor) of kv_lens or kv_start: an int, or an int32 [b] tensor on the device (decode and
    the cache append take them alike)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return 0, value, None
    if not isinstance(value, TensorInfo):
        raise TypeError(f"{name}: expected an int or an int32 tensor [b], got {type(value).__name__} {value!r}")
    if value.dtype != "int32":
        raise TypeError(f"{name}: expected an int32 tensor, got dtype {value.dtype}")
    if value.shape != (batch,):
        raise ValueError(f"{name}: expected shape ({batch},) (one per row), got {value.shape}")
    if batch > 1 and value.strides != (1,):  # the kernel reads lens[b] from the pointer alone
        raise ValueError(f"{name}: expected a contiguous tensor (stride 1), got stride {value.strides[0]}; "
                         f"pass {name}.contiguous()")
    if value.device != device:
        raise ValueError(f"{name}: expected a tensor on {device_name(device)} (q's device), got one on "
                         f"{device_name(value.device)}")
    return value.ptr, 0, value


@dataclass(frozen=True)
class _Validated:
    """A call whose arguments passed every check: the geometry and the fields that do not depend on the launch."""

    batch: int
    heads_q: int
    head_dim: int
    heads_kv: int
    capacity: int
    k_strides: tuple[int, int, int, int]
    v_strides: tuple[int, int, int, int]
    fields: dict
    cache: str = SAME  # what the caches hold
    form: str = FIXED  # fixed-capacity caches, or paged pools
    tokens: int = 1  # query tokens a cache row (batch counts query rows: cache rows x tokens)


def plan_decode(q: TensorInfo, k_cache: TensorInfo, v_cache: TensorInfo, kv_lens, *, kv_layout: str = "bhsd", kv_start=None,
                scale: float | None = None, softcap: float | None = None, num_splits: int | None = None,
                out: TensorInfo | None = None, return_lse: bool = False, batch_invariant: bool = False,
                sms: int = 132, arch: str | None = None, max_shared: int | None = None, resident=None,
                active_clusters=None, pipeline: str | None = None, for_step: bool = False, k_scale=None,
                v_scale=None, block_table: TensorInfo | None = None, tuning: str | None = None,
                q_lens: TensorInfo | None = None) -> DecodePlan:
    """Validate a decode_attention call and plan its launches.

    kv_lens / kv_start: an int, or a TensorInfo of an int32 [b] tensor on q's device (its values are
    the device's business: out-of-range rows come out NaN). ``sms`` and ``arch`` (the tuned rule's: ``tuning``'s,
    a tuning target, when given) feed the split rule, with
    ``resident(module, symbol, shared)``: blocks of a kernel one multiprocessor holds (None: the rule's);
    ``max_shared`` (the GPU's opt-in shared memory per block, bytes) rejects head dims whose tiles exceed it.
    Split-KV on ``arch`` sm_90 on runs each (row, KV head)'s splits as one cluster when there are at most
    MAX_CLUSTER_SPLITS of them and ``active_clusters(module, symbol, threads, shared, cluster)`` (None: assumed)
    says the GPU can place such a cluster; otherwise a combine kernel merges the splits.
    K/V pipeline: the tuned table's choice among those the call has a variant of that ``max_shared``
    allows (ws from sm_90 on; with ``num_splits`` given: narrow); ``pipeline`` (a name of PIPELINES) forces one.
    ``for_step``: the attention of a decode step, which takes ws where the table picks ws_deep (the same tiles and
    arithmetic in a deeper ring): the step's fused kernels have the ws ring, and its two launches, whichever side of
    the bus its lengths are on, plan as the fused one does.
    ``batch_invariant``: each row split by its own key count (invariant_splits; the grid holds the most a row
    of the capacity gets) on the first of INVARIANT_PIPELINES the call has, merged in a cluster or by the
    combine kernel with the cluster's arithmetic: a row's result depends on its own inputs alone.
    FP8 (e4m3) caches: ``k_scale`` / ``v_scale`` dequantize them (cache_scales), on the narrow pipeline or, from sm_90
    on at head dim 128 for DECODE_FP8_WS_MAX_GROUP query rows or fewer a KV head (query tokens x group), ws (where
    the table picks ws_deep too).
    Paged caches (``block_table`` given): k_cache and v_cache are pools of pages (page_table), on the narrow pipeline
    or, from sm_90 on for 16-bit caches of head dims 64 and 128, ws_deep (where the table picks ws too: stand_in).
    Several query tokens a row (q [b, n, h_q, d], ``q_lens``: query_counts): every pipeline's blocks take the n x
    group query rows of a (row, KV head) together (DECODE_HEAD_ROWS a block), so that its keys are read once for all
    of them.
    """
    call = validate(q, k_cache, v_cache, kv_lens, kv_layout=kv_layout, kv_start=kv_start, scale=scale,
                    softcap=softcap, num_splits=num_splits, out=out, max_shared=max_shared, pipeline=pipeline,
                    batch_invariant=batch_invariant, k_scale=k_scale, v_scale=v_scale, block_table=block_table,
                    q_lens=q_lens)
    return _choose_launch(q, k_cache, v_cache, call, num_splits=num_splits, sms=sms, arch=arch, max_shared=max_shared,
                          resident=resident, active_clusters=active_clusters, pipeline=pipeline,
                          batch_invariant=batch_invariant, for_step=for_step, tuning=tuning)


def check_lengths(lens_value: int, start_value: int, capacity: int, lens_on_device: bool,
                  start_on_device: bool) -> None:
    """The checks of host-known lengths (ints): 0 <= kv_lens <= T, 0 <= kv_start (<= kv_lens when both are ints)."""
    if not lens_on_device and not 0 <= lens_value <= capacity:
        raise ValueError(f"kv_lens: expected 0 <= kv_lens <= T = {capacity} (the cache's positions), got {lens_value}")
    if not start_on_device and start_value < 0:
        raise ValueError(f"kv_start: expected a non-negative int, got {start_value}")
    if not start_on_device and not lens_on_device and start_value > lens_value:
        raise ValueError(f"kv_start: expected at most kv_lens = {lens_value}, got {start_value}")


def check_host_lengths(name: str, values: list[int], kv_lens, k_cache, kv_layout: str, block_table=None) -> None:
    """The values of a kv_lens or kv_start given on the host (a CPU tensor): every one checked (ValueError), so
    that the device copy needs no NaN rows. ``kv_lens`` as given (for kv_start's bound), ``k_cache`` any
    4-d array (its capacity; a paged pool's: its page size times ``block_table``'s width); a cache of another rank
    is left to validate to explain."""
    if len(getattr(k_cache, "shape", ())) != 4 or kv_layout not in KV_LAYOUTS:
        return
    capacity = k_cache.shape[2] if kv_layout == "bhsd" else k_cache.shape[1]
    if block_table is not None:
        if len(getattr(block_table, "shape", ())) != 2:
            return
        capacity *= block_table.shape[1]
    if name == "kv_lens" and any(not 0 <= n <= capacity for n in values):
        raise ValueError(f"kv_lens: expected values in [0, T = {capacity}], got {values}")
    if name == "kv_start":
        lens = kv_lens.tolist() if hasattr(kv_lens, "tolist") else [kv_lens] * len(values)
        if any(not 0 <= s <= n for s, n in zip(values, lens)):
            raise ValueError(f"kv_start: expected 0 <= kv_start <= kv_lens per row, got {values} for kv_lens {lens}")


def cache_kind(q: TensorInfo, k: TensorInfo, v: TensorInfo) -> str:
    """SAME or FP8: what the caches hold, checked (TypeError): q fp16 or bf16, both caches of q's dtype or both e4m3."""
    if q.dtype not in DTYPES:
        raise TypeError(f"q: expected float16 or bfloat16, got {q.dtype}")
    for name, t in (("k_cache", k), ("v_cache", v)):
        if t.dtype not in (q.dtype, FP8):
            raise TypeError(f"{name}: expected q's dtype {q.dtype} or float8_e4m3fn (an FP8 cache), got {t.dtype}")
    if k.dtype != v.dtype:
        raise TypeError(f"k_cache, v_cache: expected one dtype for both, got {k.dtype} and {v.dtype}")
    return FP8 if k.dtype == FP8 else SAME


def query_counts(q_lens, tokens: int, batch: int, device: int) -> dict:
    """The kernel fields of each cache row's query tokens (TOKEN_ROWS): ``q_lens`` an int32 [b] tensor on q's device
    (each row's count, at most ``tokens``, q's tokens a row: rows of fewer are padded; the values are the device's
    business: a count out of [0, tokens] or past the row's keys makes the row NaN), or None (every row ``tokens``)."""
    if q_lens is None:
        return {"q_lens": 0, "queries": tokens}
    if not isinstance(q_lens, TensorInfo):
        raise TypeError(f"q_lens: expected an int32 tensor [{batch}] or None, got {type(q_lens).__name__}")
    ptr = length_argument(q_lens, "q_lens", batch, device)[0]
    return {"q_lens": ptr, "queries": tokens}


def sink_fields(sinks, heads: int, device: int) -> dict:
    """The kernel fields of attention sinks (gpt-oss's: a logit per query head joining the softmax's denominator, its
    value zero): an fp32 [heads] tensor on ``device``, any stride, checked (TypeError/ValueError naming ``sinks``);
    None: no sink (a null pointer)."""
    if sinks is None:
        return {"sinks": 0, "sinks_stride": 0}
    if not isinstance(sinks, TensorInfo):
        raise TypeError(f"sinks: expected a float32 tensor [{heads}] or None, got {type(sinks).__name__}")
    if sinks.dtype != "fp32":
        raise TypeError(f"sinks: expected a float32 tensor, got {sinks.dtype}")
    if sinks.shape != (heads,):
        raise ValueError(f"sinks: expected shape [{heads}] (a logit per query head), got {list(sinks.shape)}")
    if sinks.device != device:
        raise ValueError(f"sinks: expected a tensor on {device_name(device)}, got one on {device_name(sinks.device)}")
    return {"sinks": sinks.ptr, "sinks_stride": sinks.strides[0] if heads > 1 else 0}


def cache_scales(k_scale, v_scale, cache: str, heads_kv: int, device: int) -> dict:
    """The kernel fields of an FP8 cache's scales (its values are stored value / scale): each a positive finite number
    (None: 1), or an fp32 tensor on q's device, 0-d (one for every KV head) or [h_kv] (one each), read by the kernel.
    Refused for caches of q's own type, which have nothing to dequantize (their fields: no pointer, 1)."""
    fields = {}
    for name, value in (("k_scale", k_scale), ("v_scale", v_scale)):
        if cache != FP8 and value is not None:
            raise ValueError(f"{name}: a scale dequantizes an FP8 cache (float8_e4m3fn); these caches hold q's dtype")
        pointer, stride, number = 0, 0, 1.0
        if isinstance(value, TensorInfo):
            if value.dtype != "fp32":
                raise TypeError(f"{name}: expected a float32 tensor, got {value.dtype}")
            if value.device != device:
                raise ValueError(f"{name}: expected a tensor on {device_name(device)} (q's device), got one on "
                                 f"{device_name(value.device)}")
            if value.shape == ():
                pointer = value.ptr
            elif value.shape == (heads_kv,):
                pointer, stride = value.ptr, value.strides[0]
            else:
                raise ValueError(f"{name}: expected a 0-d tensor (one scale) or one of shape [{heads_kv}] (one per KV "
                                 f"head), got shape {list(value.shape)}")
        elif value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name}: expected a float, a float32 tensor or None, got {type(value).__name__}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: expected a positive finite scale, got {value!r}")
            number = float(value)
        fields.update({name: pointer, f"{name}_stride": stride, f"{name}_value": number})
    return fields


def validate(q: TensorInfo, k: TensorInfo, v: TensorInfo, kv_lens, *, kv_layout, kv_start, scale, softcap,
              num_splits, out, max_shared, pipeline, batch_invariant=False, k_scale=None,
              v_scale=None, block_table=None, q_lens=None) -> _Validated:
    """Every check of a call that does not depend on the launch chosen; ValueError/TypeError naming the argument.
    (The float64 reference runs it too: it takes the calls the kernels take.)"""
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout: expected one of {KV_LAYOUTS}, got {kv_layout!r}")
    cache = cache_kind(q, k, v)
    for name, t in (("k_cache", k), ("v_cache", v)):
        if t.device != q.device:
            raise ValueError(f"{name}: expected a tensor on q's device {device_name(q.device)}, got one on {device_name(t.device)}")
    (rows, h_q, d), q_strides, tokens = query_tokens(q)
    b = rows // max(tokens, 1)  # cache rows; the kernels' query rows are rows = b x tokens
    paged = block_table is not None
    (kb, h_kv, capacity, kd), k_strides = cache_rows(k, "k_cache", kv_layout, paged)
    v_sizes, v_strides = cache_rows(v, "v_cache", kv_layout, paged)
    if v_sizes != (kb, h_kv, capacity, kd):
        raise ValueError(f"v_cache: expected k_cache's shape {k.shape}, got {v.shape}")
    paging = {}
    if paged:
        capacity, paging = page_table(block_table, b, capacity, kb, q.device,
                                      (("k_cache", k, k_strides), ("v_cache", v, v_strides)))
    elif kb != b:
        raise ValueError(f"k_cache: expected batch {b} (q's), got {kb}")
    if kd != d:
        raise ValueError(f"k_cache: expected head dim {d} (q's), got {kd}")
    if d not in HEAD_DIMS:
        raise ValueError(f"q: head dim {d} is not supported; supported head dims: {HEAD_DIMS}")
    if h_kv == 0 or h_q % h_kv:
        raise ValueError(f"q: expected a number of heads that is a multiple of k_cache's {h_kv}, got {h_q}")
    if rows > GRID_YZ_MAX:
        raise ValueError(f"q: at most {GRID_YZ_MAX} query rows (rows x query tokens) per call, got {rows}")
    if capacity > MAX_CAPACITY:
        raise ValueError(f"k_cache: at most {MAX_CAPACITY} positions, got {capacity}")
    if cache == FP8:
        if d not in FP8_HEAD_DIMS:
            raise ValueError(f"k_cache: FP8 caches serve head dims {FP8_HEAD_DIMS}, got {d}")
        for name, t, st in (("k_cache", k, k_strides), ("v_cache", v, v_strides)):
            copy_rows(name, t, st, "an FP8 cache")
    if max_shared is not None and dispatch.DECODE_SHARED[d, NARROW, cache] > max_shared:
        raise ValueError(f"q: head dim {d} needs {dispatch.DECODE_SHARED[d, NARROW, cache]} bytes of shared memory "
                         f"per block; this GPU allows {max_shared}")
    if pipeline is not None and pipeline not in PIPELINES:
        raise ValueError(f"pipeline: expected one of {PIPELINES} or None, got {pipeline!r}")
    group = h_q // h_kv
    # blocks per KV head: its query rows (a row's tokens x the group's heads, packed) in tiles of DECODE_HEAD_ROWS
    head_groups = math.ceil(tokens * group / dispatch.DECODE_HEAD_ROWS)
    if h_kv * head_groups > GRID_YZ_MAX:
        raise ValueError(f"k_cache: too many KV heads x head groups for one launch ({h_kv} x {head_groups})")

    lens_ptr, lens_value, lens_info = length_argument(kv_lens, "kv_lens", b, q.device)
    start_ptr, start_value, start_info = length_argument(0 if kv_start is None else kv_start, "kv_start", b,
                                                         q.device)
    check_lengths(lens_value, start_value, capacity, lens_info is not None, start_info is not None)
    if tokens > 1 and lens_info is None and q_lens is None and lens_value < tokens:
        raise ValueError(f"kv_lens: the caches hold each row's {tokens} new tokens (q's), so kv_lens >= {tokens}; got "
                         f"{lens_value}")

    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise TypeError(f"scale: expected a finite float or None, got {scale!r}")
    if softcap is not None and (isinstance(softcap, bool) or not isinstance(softcap, (int, float))
                                or not softcap > 0 or not math.isfinite(softcap)):
        raise ValueError(f"softcap: expected a positive finite float or None, got {softcap!r}")
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int)
                                   or not 1 <= num_splits <= MAX_SPLITS):
        raise ValueError(f"num_splits: expected an int in [1, {MAX_SPLITS}] or None, got {num_splits!r}")
    if type(batch_invariant) is not bool:
        raise TypeError(f"batch_invariant: expected True or False, got {batch_invariant!r}")
    if batch_invariant and num_splits is not None:
        raise ValueError(f"num_splits: batch_invariant splits each row by its own key count; got num_splits="
                         f"{num_splits} too (give one or the other)")

    if out is not None:
        if out.shape != q.shape:
            raise ValueError(f"out: expected q's shape {q.shape}, got {out.shape}")
        if out.dtype != q.dtype:
            raise TypeError(f"out: expected q's dtype {q.dtype}, got {out.dtype}")
        if out.device != q.device:
            raise ValueError(f"out: expected a tensor on q's device {device_name(q.device)}, got one on {device_name(out.device)}")
        if out.has_internal_overlap():
            raise ValueError("out: has a broadcast (stride 0) dimension; each output element needs its own memory")
        for name, t in (("q", q), ("k_cache", k), ("v_cache", v), ("kv_lens", lens_info), ("kv_start", start_info),
                        ("block_table", block_table)):
            if t is not None and out.overlaps(t):
                raise ValueError(f"out: overlaps {name}, which the kernel reads while it writes out")
        out_rows, out_strides, out_tokens = query_tokens(out, "out")
        if out_tokens != tokens:
            raise ValueError(f"out: expected q's {tokens} query tokens a row, got shape {list(out.shape)}")
    else:
        out_strides = (h_q * d, d, 1)  # the caller allocates a contiguous tensor of q's shape
    fields = {
        "q": q.ptr, "k": k.ptr, "v": v.ptr,
        "kv_lens": lens_ptr, "kv_len": lens_value, "kv_start": start_ptr, "kv_start_value": start_value,
        "capacity": capacity, "batch": rows, "heads_q": h_q, "group": group, "head_groups": head_groups,
        **query_counts(q_lens, tokens, b, q.device),
        "q_sb": q_strides[0], "q_sh": q_strides[1], "q_sd": q_strides[2],
        "out_sb": out_strides[0], "out_sh": out_strides[1], "out_sd": out_strides[2],
        "scale": float(scale), "softcap": float(softcap or 0.0),
        **cache_scales(k_scale, v_scale, cache, h_kv, q.device), **paging,
    }
    for prefix, st in (("k", k_strides), ("v", v_strides)):
        fields.update({f"{prefix}_sb": st[0], f"{prefix}_sh": st[1], f"{prefix}_st": st[2], f"{prefix}_sd": st[3]})
    return _Validated(rows, h_q, d, h_kv, capacity, k_strides, v_strides, fields, cache, PAGED if paged else FIXED,
                      tokens)


def _choose_launch(q: TensorInfo, k: TensorInfo, v: TensorInfo, call: _Validated, *, num_splits, sms, arch,
                   max_shared, resident, active_clusters, pipeline, batch_invariant=False,
                   for_step=False, tuning=None) -> DecodePlan:
    """The variant, K/V pipeline, split count and launches of a validated call."""
    b, h_q, d, h_kv = call.batch, call.heads_q, call.head_dim, call.heads_kv
    head_groups = call.fields["head_groups"]
    cache_rows = b // call.tokens  # the grid's rows: a block serves every query token of its cache row
    cache, form = call.cache, call.form
    # The kernels copy 16-byte pieces of contiguous rows (FP8 and paged caches were checked to allow it), else one
    # element at a time through all four strides (codegen's rule_decode_contiguous_rows_copy_16_bytes)
    copies = cache == FP8 or form == PAGED or (rows_copy(k, call.k_strides) and rows_copy(v, call.v_strides))
    strides, vec = (3, COPY_BYTES // k.itemsize) if copies else (4, 1)
    blocks = cache_rows * h_kv * head_groups
    # ws reads the caches through tensor maps: sm_90 on, a cache of at least one row and position to map, no
    # broadcast (stride 0) axis, strides within the engine's 2**40 bytes
    # (over FP8 caches, blocks of DECODE_FP8_WS_MAX_GROUP query rows or fewer, a row's tokens x the group's heads:
    # their warps read keys as the mma's rows)
    maps_ok = tensor_maps(arch) and b > 0 and call.capacity > 0 and all(
        0 < s * k.itemsize < 2**40 for s in call.k_strides[:3] + call.v_strides[:3]) and (
            cache != FP8 or call.tokens * call.fields["group"] <= dispatch.DECODE_FP8_WS_MAX_GROUP)
    available = tuple(p for p in PIPELINES if (q.dtype, d, strides, vec, p, cache, form) in dispatch.DECODE and (
        max_shared is None or dispatch.DECODE_SHARED[d, p, cache] <= max_shared) and (
            p not in WARP_SPECIALIZED or maps_ok))
    if pipeline is not None and pipeline not in available:
        raise ValueError(f"pipeline: the {pipeline} pipeline needs a contiguous head dim of at most "
                         f"{FAST_PIPELINES_MAX_HEAD_DIM}, 16-byte aligned K/V rows and the shared memory it takes"
                         + (" (head dims 64 and 128, sm_90 or newer, a cache with rows and positions; over FP8 "
                            f"caches head dim 128 and {dispatch.DECODE_FP8_WS_MAX_GROUP} query rows or fewer a KV "
                            "head, query tokens x group)" if pipeline in WARP_SPECIALIZED else "")
                         + f"; this call has head dim {d}, {strides} K/V strides, {vec}-element copies"
                         + (f", FP8 caches ({call.tokens} query tokens x groups of {call.fields['group']})"
                            if cache == FP8 else "")
                         + (", paged caches (narrow and ws_deep)" if form == PAGED else "")
                         + (f", arch {arch}" if pipeline in WARP_SPECIALIZED else ""))
    if batch_invariant:
        pipeline = pipeline or next((p for p in INVARIANT_PIPELINES if p in available), NARROW)
        num_splits = invariant_splits(call.capacity)  # the most a row of this cache gets
    elif num_splits is None:
        rule = split_rule(tuning or arch, cache, form)
        per_sm = None  # only the wave rule (no tuned table) counts resident blocks
        if resident is not None and "table" not in rule:
            module, symbol = dispatch.DECODE[(q.dtype, d, strides, vec, NARROW, cache, form)][:2]
            per_sm = resident(module, symbol, dispatch.DECODE_SHARED[d, NARROW, cache])
        forced = pipeline
        num_splits, pipeline = choose_pipeline(blocks, call.capacity, sms, rule, per_sm, available, pipeline)
        if for_step and forced is None and pipeline == WS_DEEP and WS in available:
            num_splits, pipeline = choose_pipeline(blocks, call.capacity, sms, rule, per_sm, available, WS)
    splits = num_splits
    key = (q.dtype, d, strides, vec, pipeline or NARROW, cache, form)
    module, symbol, layout_id, combine_module, combine_symbol = dispatch.DECODE[key]

    names, fmt = dispatch.DECODE_PARAMS[layout_id]
    # sm_90 on, both kernels are launched programmatically: each is scheduled while the kernel before it
    # in the stream runs, and waits for that kernel's results before touching memory (common.cuh).
    programmatic = programmatic_launch(arch)
    shared = dispatch.DECODE_SHARED[d, key[4], cache]
    threads = (dispatch.DECODE_PAGED_THREADS if form == PAGED else dispatch.DECODE_THREADS)[key[4]]
    cluster = 1
    if 1 < splits <= MAX_CLUSTER_SPLITS and clusters(arch) and (
            active_clusters is None or active_clusters(module, symbol, threads, shared, splits) > 0):
        cluster = splits
    attention = Launch(module, symbol, fmt, names, (splits, h_kv * head_groups, cache_rows), (threads, 1, 1), shared,
                       overlap_previous=programmatic, cluster=cluster)
    # batch-invariant: a cluster and the combine kernel merge with the same arithmetic, so the choice between them
    # (the GPU's, the capacity's) changes no bit
    combine = None
    if splits > 1 and cluster == 1:  # the attention kernel writes partial results (partial_out, set at launch)
        c_names, c_fmt = dispatch.DECODE_PARAMS["combine"]
        combine = Launch(combine_module, combine_symbol, c_fmt, c_names, (b * h_q, 1, 1),
                         (dispatch.DECODE_COMBINE_THREADS, 1, 1), 0, overlap_previous=programmatic)
    # ws: the tensor maps of this call's caches come with its pointers (decode_api); empty (packed as zeros) until then
    maps = dict.fromkeys(MAP_FIELDS, b"") if MAP_FIELDS[0] in names else {}
    return DecodePlan(key, q.device, b, h_q, d, splits, attention, combine, call.tokens,
                      {**call.fields, **maps, "num_splits": splits, "batch_invariant": int(batch_invariant)})
