"""Decode attention's kernel ABI and launch knobs: parameter structs, the shared-memory tile geometry, the
constants the template is rendered with, and the split rule's default for GPUs without tuning data.

Both the template and the runtime read these: the template to declare the struct and size its tiles, the
runtime (through the generated dispatch table) to pack the struct and request the dynamic shared memory.
Every field is 8 bytes (abi.py).
"""

from __future__ import annotations

from .abi import CPTR, F64, I64, PTR, TMAP, Params
from .decode_variants import Cache, DecodeCombineVariant, DecodeMergeVariant, DecodeVariant, Pipeline

# Query heads one block serves from one read of its KV head: the 16 rows of the tensor-core tile. A GQA
# group larger than this is split over several blocks (each reads the KV head again).
HEAD_ROWS = 16
# Warps per block: each takes a quarter of every K/V tile's keys (16 or 32, decode_variants.Pipeline).
WARPS = 4
# The ws pipeline's block has one more warp, whose lane issues the tile copies (the TMA engine's), and its
# stages begin on a 1024-byte boundary (the 128-byte swizzle's), which the dynamic shared memory may not.
PRODUCER_WARPS = 1
# Over paged pools the ws_deep kernel's producer warps copy the keys by cp.async, page by page: one warp issuing them
# fed a block at 0.41-0.46x a copy's rate on an H200 (b = 8, one block a multiprocessor; 2026-12-03), so four share a
# tile (16 keys each), in a block of 256 threads (one a multiprocessor: registers for all of them)
PAGED_PRODUCER_WARPS = 4
WS_ALIGNMENT_SLACK = 1024
WS_MAX_BLOCKS = 2  # 160 threads a block: a third block would leave 136 registers a thread (the tile needs ~170)
# Elements between tile rows in shared memory beyond the head dim (16 bytes), so that the eight rows an
# ldmatrix phase reads start on distinct 16-byte bank groups.
ROW_PADDING = 8
# Split-KV from sm_90 on: up to this many splits of a (row, KV head) run as one thread-block cluster and
# merge their results through distributed shared memory; more splits take the combine kernel. 8 is the
# portable cluster size; clusters of 16 (H100's limit) were slower than 16 splits and the combine kernel
# (b = 1, T = 8k: 21.0 against 20.3 us): a GPC holds few of them (docs/performance.md).
MAX_CLUSTER_SPLITS = 8
# Shared memory of one sm_90 multiprocessor, and what the driver keeps of it per resident block.
SM90_SHARED_PER_SM = 228 * 1024
SHARED_RESERVED_PER_BLOCK = 1024
MAX_MIN_BLOCKS = 3  # 4 blocks of 128 threads would leave 128 registers a thread
# Dynamic shared memory one attention block may use, per pipeline: the K/V stages take as many tiles as
# fit (all but one in flight), at least 2. The narrow pipeline's 99 KB is the opt-in limit of sm_86/89
# and lets two blocks share an sm_90 multiprocessor (three at head dim 128); the deep one takes what two
# blocks per sm_90 multiprocessor leave room for; the wide one always 2 stages.
SHARED_BUDGET = 99 * 1024
TWO_BLOCK_BUDGET = SM90_SHARED_PER_SM // 2 - SHARED_RESERVED_PER_BLOCK
# An FP8 cache at these head dims: a group of 8 heads or fewer streams each warp's keys through a ring of its own and
# widens them in registers (attend_fp8_chunk in decode.cuh), whose warps wait on their own latency: so as many stages
# as let three blocks share an sm_90 multiprocessor where that leaves 2 or more (64 and 128; at 256 the widened tiles
# alone exceed it), their rings taking the region of the widened tiles and stages.
FP8_RING_HEAD_DIMS = (64, 128, 256)
# The ws pipelines over FP8 caches read each warp's keys as the rings do (keys as the mma's rows): groups of this many
# heads or fewer; larger ones take the narrow pipeline, whose warps widen their keys in shared memory
FP8_WS_MAX_GROUP = 8
THREE_BLOCK_BUDGET = SM90_SHARED_PER_SM // 3 - SHARED_RESERVED_PER_BLOCK
# The ws_deep pipeline's ring (one block per multiprocessor): 4 stages of 64 keys at head dim 128. Measured with the
# ws sweep (results/decode-ws-sweep-h100-2026-11-27-ring-depth.json, H100, bf16, d 128) against 5 and 6 stages: 4 as
# fast or faster on every grid timed (b = 8, T = 32k in one pass 1.024x copy, where 5 and 6 were best at 2 splits,
# 1.012x; b = 1, T = 128k 0.988 against 0.986 and 0.984; b = 128, T = 32k 1.035 against 1.033 and 1.031).
WS_DEEP_RING_BYTES = 128 * 1024
MIN_STAGES, MAX_STAGES = 2, 8
# Threads of a combine block (one per output element, looping for head dims above it).
COMBINE_THREADS = 128
# Size qualifier of the attention kernel's 16-byte K/V copies ("", ".L2::128B" or ".L2::256B": how much the
# L2 fetches from memory around each one).
L2_PREFETCH = ".L2::128B"
# The ws pipeline's K/V loads ask the L2 to evict their lines first (each is read once): measured with the ws sweep
# (results/decode-ws-sweep-h100-2026-11-25-evict-first.json, H100, bf16, d 128, 3 stages) 1.026x at b = 8, T = 512
# and 1.014x at b = 128, T = 512,
# and within 0.3 % elsewhere (2k-128k keys); the TMA producer pattern alone the same way
# (results/access-bounds-h100-2026-11-25-grid.json).
WS_EVICT_FIRST = True
# Bytes the L2 fetches around each TMA request of the ws pipelines (their tensor maps' L2 promotion: 0, 64, 128 or 256):
# on an H200 a 3-stage TMA stream of the caches read 1.0x a device copy with 256 and 1.063-1.071x with 128, 64 or
# none, as fast as a cp.async stream of the same bytes (results/access-bounds-h200-2026-12-03-l2-promotion.json).
# Set at launch, not compiled in: tuning data measured under another value is stale (FAMILY.tuned_settings).
WS_L2_PROMOTION = 128
# A query group of 8 heads or fewer is computed with keys as the mma's rows (attend_tile_by_keys: half the tensor-core
# work of heads as rows, which pads the group to 16), by every pipeline, so that their tiles of 64 keys keep giving
# the same bits (batch-invariant mode).
KEYS_AS_ROWS = True
# Whether the loop puts the next tile's copies in flight before it waits for the current tile (kStages tiles
# in flight during the wait, two barriers a tile) rather than after (kStages - 1, one): a knob for sweeps.
ISSUE_EARLY = False
# Batch-invariant mode: a row of n keys is split into the count of the first (most keys, splits) entry with
# n <= most keys (None: any n), equal shares rounded up to whole tiles, whatever the grid; the last count is
# the most any row gets. Measured (results/decode-fixed-splits-scan-h100-2026-11-25.json, H100, h_q 32 / h_kv 8,
# d 128): against the tuned choice, one split of a 512-key row costs 0.98-1.04x at b = 8-128, two splits of
# 2k-32k keys 0.99-1.04x, and 16 splits of 32k keys 1.02x; 4 or 8 splits cost 1.10-1.19x at b = 8, 2k-32k.
# Beside the ws pipeline, whose one pass is the tuned choice for 2048-key rows at b >= 8, two splits of them ran
# at 0.94x of it at b = 8 and 32 (results/decode-h100-2026-11-25-ws-rerun-invariant-on-ws.json: full rows, where
# the grid's split and the row's agree): so one split up to 2048 keys, at the cost of a lone row of 1-2k keys.
INVARIANT_SPLITS = ((2048, 1), (8192, 2), (None, 16))
# Without tuning data for an arch: the split rule of runtime/decode_plan.choose_splits with these values.
SPLIT_DEFAULT = {"blocks_per_sm": 2.0, "min_keys_per_split": 256, "wave_efficiency": 0.9}


def stage_bytes(head_dim: int, tile: int, itemsize: int = 2, padded: bool = True) -> int:
    """One pipeline stage: a K tile and a V tile of ``tile`` keys (rows padded, or the ws pipeline's swizzled)."""
    return 2 * tile * (head_dim + (ROW_PADDING if padded else 0)) * itemsize


def ws_fixed_bytes(head_dim: int, n_stages: int) -> int:
    """The ws pipeline's shared memory besides its stages: the alignment slack, the query tile, two mbarriers a
    stage and 16 bytes after them (a paged pool's malformed-entry flag)."""
    return WS_ALIGNMENT_SLACK + query_bytes(head_dim) + 16 * n_stages + 16


def query_bytes(head_dim: int, itemsize: int = 2) -> int:
    return HEAD_ROWS * (head_dim + ROW_PADDING) * itemsize


def widened_bytes(head_dim: int, tile: int = Pipeline.NARROW.tile_keys) -> int:
    """An FP8 cache's widened keys: each warp's share of a ``tile``-key tile, K and V, in q's 16-bit type with padded
    rows (the tiles attend_tile reads): the whole tile over the warps."""
    return 2 * tile * (head_dim + ROW_PADDING) * 2


def merge_bytes(head_dim: int, warps: int = WARPS) -> int:
    """What finish_block keeps over the K/V stages at the end: the warps' maxima, sums and O, their weights, the
    rows' log-sum-exps, the block's own O and the cluster merge's split weights (decode.cuh)."""
    return ((2 + head_dim + 1) * warps * HEAD_ROWS + HEAD_ROWS * (1 + head_dim)
            + (MAX_CLUSTER_SPLITS + 1) * HEAD_ROWS) * 4


def stages(head_dim: int, pipeline: Pipeline = Pipeline.NARROW, cache: Cache = Cache.SAME) -> int:
    """K/V pipeline stages for ``head_dim``: as many as the pipeline's budget holds, within [MIN_STAGES,
    MAX_STAGES]. An FP8 cache's narrow pipeline stages its bytes as they are (rows unpadded: nothing reads them by
    ldmatrix) beside the widened keys; its ws pipelines stage them as the TMA engine writes them (a byte an element)."""
    if cache is Cache.E4M3 and not pipeline.warp_specialized:
        budget = THREE_BLOCK_BUDGET if head_dim in FP8_RING_HEAD_DIMS else SHARED_BUDGET
        fit = (budget - query_bytes(head_dim) - widened_bytes(head_dim)) // stage_bytes(
            head_dim, pipeline.tile_keys, itemsize=1, padded=False)
        return max(MIN_STAGES, min(MAX_STAGES, fit))
    if pipeline is Pipeline.WIDE:
        return MIN_STAGES
    if pipeline.warp_specialized:  # ws: as many as two blocks per multiprocessor leave room for; ws_deep: its ring
        stage = stage_bytes(head_dim, pipeline.tile_keys, cache.itemsize(2), padded=False)
        fit = ((TWO_BLOCK_BUDGET - ws_fixed_bytes(head_dim, MAX_STAGES)) if pipeline is Pipeline.WS
               else WS_DEEP_RING_BYTES) // stage
        return max(MIN_STAGES, min(MAX_STAGES, fit))
    budget = TWO_BLOCK_BUDGET if pipeline is Pipeline.DEEP else SHARED_BUDGET
    fit = (budget - query_bytes(head_dim)) // stage_bytes(head_dim, pipeline.tile_keys)
    return max(MIN_STAGES, min(MAX_STAGES, fit))


def shared_bytes(head_dim: int, pipeline: Pipeline = Pipeline.NARROW, n_stages: int | None = None,
                 warps: int = WARPS, tile: int | None = None, cache: Cache = Cache.SAME) -> int:
    """Dynamic shared memory of one attention block: the K/V stages, then the query tile (an FP8 cache's: the
    widened keys, then its stages, then the query tile). The warps' partial results are merged over the stages at the
    end, so those must hold them (asserted below). ``n_stages``, ``warps`` and ``tile`` (keys) override the
    pipeline's, for experiments."""
    n_stages = stages(head_dim, pipeline, cache) if n_stages is None else n_stages
    if cache is Cache.E4M3 and not pipeline.warp_specialized:  # (tile and warps: a sweep's, benchmarks/decode_sweep.py)
        keys = tile or pipeline.tile_keys
        region = widened_bytes(head_dim, keys) + n_stages * stage_bytes(head_dim, keys, 1, padded=False)
        assert merge_bytes(head_dim, warps) <= region, "the warps' partial results fit over the widened keys and stages"
        return region + query_bytes(head_dim)
    if pipeline.warp_specialized:
        stages_total = n_stages * stage_bytes(head_dim, tile or pipeline.tile_keys, cache.itemsize(2), padded=False)
        assert merge_bytes(head_dim, warps) <= stages_total, "the block's merge fits over the stages"
        return stages_total + ws_fixed_bytes(head_dim, n_stages)
    stages_total = n_stages * stage_bytes(head_dim, tile or pipeline.tile_keys)
    assert warps * HEAD_ROWS * (head_dim + 2) * 4 <= stages_total, "the warps' partial results fit over the stages"
    return stages_total + query_bytes(head_dim)


def min_blocks_per_sm(head_dim: int, pipeline: Pipeline = Pipeline.NARROW, n_stages: int | None = None,
                      warps: int = WARPS, tile: int | None = None, cache: Cache = Cache.SAME) -> int:
    """Attention blocks of ``head_dim`` that sm_90's shared memory lets share a multiprocessor (at most
    MAX_MIN_BLOCKS): the kernel's launch bound, so that registers never allow fewer than shared memory."""
    fit = SM90_SHARED_PER_SM // (shared_bytes(head_dim, pipeline, n_stages, warps, tile, cache)
                                 + SHARED_RESERVED_PER_BLOCK)
    return max(1, min(WS_MAX_BLOCKS if pipeline.warp_specialized else MAX_MIN_BLOCKS, fit))


_ATTENTION = (
    (CPTR, "q"),
    (PTR, "out"),
    (PTR, "lse"),  # fp32 [batch, heads_q] or null
    (CPTR, "k"),
    (CPTR, "v"),
    (CPTR, "kv_lens"),  # int32 [batch] or null: then kv_len for every row
    (I64, "kv_len"),
    (CPTR, "kv_start"),  # int32 [batch] or null: then kv_start_value for every row
    (I64, "kv_start_value"),
    (I64, "capacity"),  # T: keys a row may attend to at most
    (I64, "batch"),
    (I64, "heads_q"),
    (I64, "group"),  # heads_q / heads_kv
    (I64, "head_groups"),  # ceil(group / HEAD_ROWS): blocks per KV head
    (I64, "q_sb"), (I64, "q_sh"), (I64, "q_sd"),
    (I64, "out_sb"), (I64, "out_sh"), (I64, "out_sd"),
    (F64, "scale"),
    (F64, "softcap"),  # 0: off
    (I64, "num_splits"),
    (PTR, "partial_out"),  # split only: fp32 [batch, heads_q, num_splits, head_dim]
    (PTR, "partial_lse"),  # split only: fp32 [batch, heads_q, num_splits]
    (I64, "batch_invariant"),  # 1: each row split by its own key count (INVARIANT_SPLITS), partial lse in base 2
)
_KV_STRIDES = {
    3: tuple((I64, f"{t}_{a}") for t in ("k", "v") for a in ("sb", "sh", "st")),
    4: tuple((I64, f"{t}_{a}") for t in ("k", "v") for a in ("sb", "sh", "st", "sd")),
}
_COMBINE = (
    (CPTR, "partial_out"),
    (CPTR, "partial_lse"),
    (PTR, "out"),
    (PTR, "lse"),
    (I64, "batch"),
    (I64, "heads_q"),
    (I64, "num_splits"),
    (I64, "out_sb"), (I64, "out_sh"), (I64, "out_sd"),
    (I64, "batch_invariant"),  # 1: the cluster merge's arithmetic, split by split in order (base-2 partial lse)
)


# cukiln.merge_attention: k partial outputs [k, b, h, d] (any strides) and their log-sum-exps [k, b, h] (fp32, any
# strides) merged into out [b, h, d] and lse [b, h] (fp32, contiguous, or null when not asked for)
_MERGE = (
    (CPTR, "outs"), (CPTR, "lses"), (PTR, "out"), (PTR, "lse"),
    (I64, "parts"), (I64, "heads"), (I64, "head_dim"),
    (I64, "outs_sk"), (I64, "outs_sb"), (I64, "outs_sh"), (I64, "outs_sd"),
    (I64, "lses_sk"), (I64, "lses_sb"), (I64, "lses_sh"),
    (I64, "out_sb"), (I64, "out_sh"), (I64, "out_sd"),
    (CPTR, "sinks"), (I64, "sinks_stride"),  # fp32 [heads] attention-sink logits (any stride), or null
)
MERGE_THREADS = 128  # a merge block's threads: one per output element, looping past it


# The ws pipeline's tensor maps of the K and V caches, ahead of the attention's fields (it reads K/V through them).
_TENSOR_MAPS = ((TMAP, "k_map"), (TMAP, "v_map"))
# An FP8 cache's dequantization scales: each a pointer to fp32 values read at [kv head * stride] (a 0-d tensor: stride
# 0; one a KV head: its stride), or null and the value (a number given on the host; 1 when none is given)
FP8_SCALES = tuple(field for c in ("k", "v") for field in ((CPTR, f"{c}_scale"), (I64, f"{c}_scale_stride"),
                                                           (F64, f"{c}_scale_value")))


# A paged cache's block table (int32 [batch, table_sb-strided], row b's pages in order), its page size as a shift
# (log2) and the pool's page count (a table entry outside [0, num_pages) makes its row NaN); the K/V stride fields
# hold the pool's (page, head, slot) strides
PAGE_TABLE = ((CPTR, "block_table"), (I64, "table_sb"), (I64, "page_shift"), (I64, "num_pages"))


# Several query tokens a cache row (every attention kernel's; a decode step's attention serves one and takes no such
# fields): query row r is token r % queries of cache row r / queries, which has q_lens[row] of them (int32 [batch], or
# null: queries)
TOKEN_ROWS = ((CPTR, "q_lens"), (I64, "queries"))


def decode_params(v: DecodeVariant | DecodeCombineVariant | DecodeMergeVariant, tokens: bool = True) -> Params:
    """(C type, field name) of every kernel parameter of ``v``, in struct order; ``tokens``: with the query tokens'
    fields (False: a decode step's attention, one token a row)."""
    if isinstance(v, DecodeMergeVariant):
        return _MERGE
    if isinstance(v, DecodeCombineVariant):
        return _COMBINE
    maps = _TENSOR_MAPS if reads_tensor_maps(v) else ()
    return (maps + _ATTENTION + _KV_STRIDES[v.strides] + (FP8_SCALES if v.cache is Cache.E4M3 else ())
            + (PAGE_TABLE if v.paged else ()) + (TOKEN_ROWS if tokens else ()))


def params_layout_id(v: DecodeVariant | DecodeCombineVariant | DecodeMergeVariant) -> str:
    if isinstance(v, DecodeMergeVariant):
        return "merge"
    if isinstance(v, DecodeCombineVariant):
        return "combine"
    return (f"attention_s{v.strides}" + ("_maps" if reads_tensor_maps(v) else "")
            + ("_fp8" if v.cache is Cache.E4M3 else "") + ("_paged" if v.paged else ""))


def reads_tensor_maps(v: DecodeVariant) -> bool:
    """Whether ``v``'s producer reads the caches through TMA tensor maps: the ws pipelines over fixed caches (over paged
    pools its producer warps copy page by page)."""
    return v.pipeline.warp_specialized and not v.paged


def producer_warps(pipeline: Pipeline, paged: bool = False) -> int:
    """Producer warps of an attention block of ``pipeline`` (over paged pools: ``paged``)."""
    if not pipeline.warp_specialized:
        return 0
    return PAGED_PRODUCER_WARPS if paged else PRODUCER_WARPS


def block_threads(pipeline: Pipeline, paged: bool = False) -> int:
    """Threads of an attention block of ``pipeline`` (over paged pools: ``paged``)."""
    return 32 * (WARPS + producer_warps(pipeline, paged))


def max_threads(v: DecodeVariant | DecodeCombineVariant | DecodeMergeVariant) -> int:
    if isinstance(v, DecodeMergeVariant):
        return MERGE_THREADS
    return COMBINE_THREADS if isinstance(v, DecodeCombineVariant) else block_threads(v.pipeline, v.paged)

