"""Decode-attention planning on the CPU: variant selection from metadata, the split rule, every bad input."""

from __future__ import annotations

import math

import pytest

from cukiln.codegen import decode_abi
from cukiln.codegen.decode_variants import Pipeline
from cukiln.decode_plan import (INVARIANT_PIPELINES, MAX_CLUSTER_SPLITS, choose_splits, effective_splits,
                                invariant_splits, plan_decode, split_from_table)
from cukiln.generated import dispatch

PIPELINES_ORDER = dispatch.DECODE_PIPELINES
from cukiln.tensors import TensorInfo

BASE = 1 << 20  # a 16-byte-aligned fake device address


def contiguous(shape, dtype="bf16", ptr=BASE, device=0) -> TensorInfo:
    strides, n = [], 1
    for size in reversed(shape):
        strides.append(n)
        n *= size
    return TensorInfo(ptr, tuple(shape), tuple(reversed(strides)), dtype, device)


def cache_slice(b, h, T, d, capacity, *, layout="bhsd", ptr=BASE, dtype="bf16") -> TensorInfo:
    """[:, :, :T] (bhsd) or [:, :T] (bshd) of a contiguous buffer with ``capacity`` positions."""
    if layout == "bhsd":
        return TensorInfo(ptr, (b, h, T, d), (h * capacity * d, capacity * d, d, 1), dtype, 0)
    return TensorInfo(ptr, (b, T, h, d), (capacity * h * d, h * d, d, 1), dtype, 0)


def plan(q=None, k=None, v=None, kv_lens=100, **kw):
    q = q or contiguous((2, 8, 128))
    k = k or cache_slice(2, 2, 256, 128, 512)
    v = v or cache_slice(2, 2, 256, 128, 512, ptr=BASE * 64)
    return plan_decode(q, k, v, kv_lens, **kw)


def test_a_cache_slice_selects_the_wide_three_stride_variant():
    p = plan(num_splits=1)
    assert p.key == ("bf16", 128, 3, 8, "narrow", "same", "fixed")
    assert p.attention.symbol == "decode_bf16_d128_s3_v8" and p.combine is None
    assert p.attention.grid == (1, 2, 2) and p.attention.block == (32 * dispatch.DECODE_WARPS, 1, 1)
    assert p.fields["k_st"] == 128 and p.fields["k_sh"] == 512 * 128  # the buffer's strides, no copy


def test_bshd_layout_reads_the_strides_of_its_axes():
    k = cache_slice(2, 2, 256, 128, 512, layout="bshd")
    v = cache_slice(2, 2, 256, 128, 512, layout="bshd", ptr=BASE * 64)
    p = plan(k=k, v=v, kv_layout="bshd")
    assert (p.fields["k_sb"], p.fields["k_sh"], p.fields["k_st"]) == (512 * 2 * 128, 128, 2 * 128)
    assert p.fields["capacity"] == 256


@pytest.mark.parametrize("offset, strides, vec", [(0, 3, 8), (8, 3, 8), (4, 4, 1), (2, 4, 1), (1, 4, 1), (6, 4, 1)])
def test_rows_on_16_byte_boundaries_take_16_byte_copies_and_others_the_general_kernel(offset, strides, vec):
    k = cache_slice(2, 2, 256, 128, 512, ptr=BASE + 2 * offset)
    p = plan(k=k, num_splits=1)
    assert p.key[2:4] == (strides, vec) and p.fields["k_sd"] == 1
    assert p.attention.symbol == f"decode_bf16_d128_s{strides}_v{vec}"


def test_odd_strides_and_a_strided_head_dim_take_four_strides():
    assert plan(k=TensorInfo(BASE, (2, 2, 256, 128), (1000 * 128, 1000, 132, 1), "bf16", 0)).key[2:4] == (4, 1)
    k = TensorInfo(BASE, (2, 2, 256, 128), (2 * 512 * 256, 512 * 256, 256, 2), "bf16", 0)
    p = plan(k=k)
    assert p.key[2:4] == (4, 1) and p.fields["k_sd"] == 2


def test_query_forms_drop_the_single_token_axis():
    for shape in ((2, 1, 8, 128), (2, 8, 1, 128)):
        q = contiguous(shape)
        p = plan(q=q)
        assert (p.batch, p.heads_q, p.head_dim) == (2, 8, 128)
        assert p.fields["q_sh"] == 128


def test_split_variant_comes_with_its_combine_kernel_and_workspace_shape():
    p = plan(num_splits=4)
    assert p.key == ("bf16", 128, 3, 8, "narrow", "same", "fixed") and p.num_splits == 4 and p.attention.grid[0] == 4
    assert p.combine.symbol == "decode_combine_bf16_d128" and p.combine.grid == (2 * 8, 1, 1)
    attention, combine = p.values(out=1, lse=2, partial_out=3, partial_lse=4)
    names = dict(zip(p.attention.field_names, attention))
    assert (names["out"], names["lse"], names["partial_out"], names["partial_lse"]) == (1, 2, 3, 4)
    assert dict(zip(p.combine.field_names, combine))["num_splits"] == 4


def test_both_kernels_launch_programmatically_from_sm_90_on():
    for arch, programmatic in (("sm_80", False), ("sm_90", True), ("sm_100", True), (None, False)):
        p = plan(num_splits=MAX_CLUSTER_SPLITS + 1, arch=arch)  # more splits than a cluster: two kernels
        assert p.attention.overlap_previous is programmatic and p.combine.overlap_previous is programmatic


@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_split_kv_merges_in_one_cluster_per_row_and_kv_head_from_sm_90_on(arch):
    for splits in range(2, MAX_CLUSTER_SPLITS + 1):
        p = plan(num_splits=splits, arch=arch)
        # one launch: the splits of a (row, KV head) are consecutive blocks along x, one cluster
        assert p.attention.cluster == splits == p.attention.grid[0] and p.combine is None
        assert p.attention.overlap_previous
    p = plan(num_splits=MAX_CLUSTER_SPLITS + 1, arch=arch)
    assert p.attention.cluster == 1 and p.combine is not None
    assert plan(num_splits=1, arch=arch).attention.cluster == 1


def test_clusters_only_where_the_gpu_has_them_and_can_place_them():
    asked = []

    def active_clusters(module, symbol, threads, shared, cluster):
        asked.append((symbol, threads, shared, cluster))
        return 0 if cluster > 6 else 5

    for arch in ("sm_80", "sm_86", None):
        p = plan(num_splits=4, arch=arch, active_clusters=active_clusters)
        assert p.attention.cluster == 1 and p.combine is not None
    assert asked == []  # not even asked before sm_90
    assert plan(num_splits=6, arch="sm_90", active_clusters=active_clusters).attention.cluster == 6
    p = plan(num_splits=7, arch="sm_90", active_clusters=active_clusters)  # the driver places none of 7
    assert p.attention.cluster == 1 and p.combine.symbol == "decode_combine_bf16_d128"
    assert asked == [("decode_bf16_d128_s3_v8", 128, dispatch.DECODE_SHARED[128, "narrow", "same"], 6),
                     ("decode_bf16_d128_s3_v8", 128, dispatch.DECODE_SHARED[128, "narrow", "same"], 7)]
    asked.clear()  # the ws block's threads: its producer warp too
    assert plan(num_splits=6, pipeline="ws", arch="sm_90", active_clusters=active_clusters).attention.cluster == 6
    assert asked == [("decode_bf16_d128_s3_v8_ws", 160, dispatch.DECODE_SHARED[128, "ws", "same"], 6)]


def test_large_groups_take_several_blocks_per_kv_head():
    q = contiguous((1, 40, 64))
    k = cache_slice(1, 2, 100, 64, 100)
    p = plan_decode(q, k, k, 100, num_splits=1)
    assert p.fields["group"] == 20 and p.fields["head_groups"] == 2
    assert p.attention.grid == (1, 4, 1) and p.fields["group"] > dispatch.DECODE_HEAD_ROWS


def test_shared_memory_fits_an_h100_block_for_every_head_dim_and_pipeline():
    for d, name, cache in dispatch.DECODE_SHARED:
        if cache != "same":
            continue  # FP8 caches: test_fp8_shared_memory
        pipeline = Pipeline(name)
        keys, pitch = pipeline.tile_keys, d + decode_abi.ROW_PADDING
        q = contiguous((1, 16, d))
        k = cache_slice(1, 1, 64, d, 64)
        # an H100's opt-in limit takes every head dim and pipeline
        p = plan_decode(q, k, k, 64, max_shared=227 * 1024, num_splits=1, pipeline=name, arch="sm_90")
        assert p.pipeline == name
        stages = decode_abi.stages(d, pipeline)
        assert p.attention.shared <= 227 * 1024
        if pipeline.warp_specialized:  # unpadded swizzled stages, then the 1 KB alignment slack, query, barriers and
            # the paged pools' flag
            assert p.attention.shared == stages * 2 * keys * d * 2 + 1024 + 16 * pitch * 2 + 16 * stages + 16
            fixed = p.attention.shared - stages * 2 * keys * d * 2
            if pipeline is Pipeline.WS_DEEP:  # its ring's stages, one block a multiprocessor
                assert stages == min(decode_abi.MAX_STAGES, decode_abi.WS_DEEP_RING_BYTES // (2 * keys * d * 2))
                assert 2 * (p.attention.shared + decode_abi.SHARED_RESERVED_PER_BLOCK) > decode_abi.SM90_SHARED_PER_SM
                continue
            # ws: as many as two blocks a multiprocessor leave room for
            budget = decode_abi.TWO_BLOCK_BUDGET
            assert stages == decode_abi.MAX_STAGES or p.attention.shared + 2 * keys * d * 2 > budget
            assert fixed + 16 * (decode_abi.MAX_STAGES - stages) + stages * 2 * keys * d * 2 <= budget
            continue
        assert p.attention.shared == stages * 2 * keys * pitch * 2 + 16 * pitch * 2
        # as many stages as the budget holds, but never fewer than 2 (one in flight, one in use); the wide
        # pipeline takes 2
        if pipeline is Pipeline.WIDE:
            assert stages == 2
            continue
        budget = decode_abi.TWO_BLOCK_BUDGET if pipeline is Pipeline.DEEP else decode_abi.SHARED_BUDGET
        assert stages >= 2 and (stages == 2 or p.attention.shared <= budget)
        assert stages == decode_abi.MAX_STAGES or p.attention.shared + 2 * keys * pitch * 2 > budget
    # the deep pipeline leaves room for two blocks per sm_90 multiprocessor, the narrow one three at d 128
    assert [decode_abi.min_blocks_per_sm(128, p) for p in Pipeline] == [3, 2, 1, 2, 1]
    # ws_deep: the ws kernel with a deeper ring at d 128 (4 stages of 32 KB), one block a multiprocessor
    assert (decode_abi.stages(128, Pipeline.WS), decode_abi.stages(128, Pipeline.WS_DEEP)) == (3, 4)


RULE = {"blocks_per_sm": 2.0, "min_keys_per_split": 512, "wave_efficiency": 0.9}


def _efficiency(blocks, splits, slots):
    waves = blocks * splits / slots
    return waves / math.ceil(waves)


def test_split_rule_fills_whole_waves():
    assert choose_splits(8, 8192, 132, RULE) == 15  # at most 16 (512 keys per split); 15 is within 90% of it
    assert choose_splits(8, 131072, 132, RULE) == 30  # 240 of 264 slots: the least within 90% of 33's 100%
    assert choose_splits(8, 131072, 132, RULE, resident=1) == 15  # 120 of 132 slots
    assert choose_splits(264, 131072, 132, RULE) == 1  # already one whole wave
    assert choose_splits(300, 131072, 132, RULE) == 3  # 1.14 waves would waste most of the second; 3.4 of 4
    assert choose_splits(8, 1023, 132, RULE) == 1  # fewer than two splits' worth of keys
    for blocks in (1, 3, 8, 50, 100, 300, 1000):
        for keys in (512, 4096, 100000):
            for resident in (None, 1, 3):
                s = choose_splits(blocks, keys, 132, RULE, resident)
                assert s == 1 or keys // s >= RULE["min_keys_per_split"]
                slots = 132 * min(RULE["blocks_per_sm"], resident or 99)
                most = min(keys // 512, math.ceil(4 * slots / blocks))
                if most < 2:
                    assert s == 1
                    continue
                # counts as the kernel runs them (whole tiles a split)
                counts = {effective_splits(keys, n) for n in range(1, most + 1)}
                best = max(_efficiency(blocks, n, slots) for n in counts)
                assert s in counts and _efficiency(blocks, s, slots) >= 0.9 * best  # and no smaller count is
                assert all(_efficiency(blocks, n, slots) < 0.9 * best for n in counts if n < s)


def test_effective_splits_match_the_kernels_whole_tile_shares():
    for tile in set(dispatch.DECODE_TILE_KEYS.values()):
        for keys in (1, 63, 64, 65, 100, 2048, 2049, 32768, 100003):
            for splits in (1, 2, 3, 7, 15, 16, 31, 64, 1000):
                share = -(-keys // splits)
                per_split = -(-share // tile) * tile
                # the kernel's split i covers [i * per_split, (i + 1) * per_split) clipped to the keys
                with_keys = sum(1 for i in range(splits) if i * per_split < keys)
                assert effective_splits(keys, splits, tile) == max(1, with_keys)
    assert effective_splits(2048, 31) == 16  # 67 keys a split round up to 128
    assert (effective_splits(2048, 12), effective_splits(2048, 12, 128)) == (11, 8)  # 171 keys: 192 or 256


# (blocks, T, best pipeline's index in (narrow, deep, wide), best splits of each pipeline)
TABLE = ((8, 512, 0, 8, 6, 4), (8, 8192, 1, 26, 16, 8), (8, 32768, 0, 32, 24, 16), (64, 8192, 2, 2, 2, 2),
         (512, 2048, 0, 2, 2, 1))


def test_a_tuned_table_gives_the_nearest_points_pipeline_and_total_of_blocks():
    assert split_from_table(8, 8192, TABLE) == (16, "deep")  # a tuned point: its fastest pipeline and count
    assert split_from_table(8, 600, TABLE) == (effective_splits(600, 8), "narrow") == (5, "narrow")  # whole tiles
    assert split_from_table(16, 8192, TABLE) == (8, "deep")  # (8, 8192)'s 128 blocks over 16: 8 splits each
    assert split_from_table(128, 8192, TABLE) == (1, "wide")  # (64, 8192)'s 128 blocks: already there
    assert split_from_table(4096, 2048, TABLE) == (1, "narrow")
    assert split_from_table(8, 130000, TABLE) == (32, "narrow")  # beyond the grid: the nearest edge
    # at least one tile of keys a split, counted as the kernel shares keys out
    assert split_from_table(8, 200, TABLE) == (effective_splits(200, 3), "narrow") == (2, "narrow")
    assert split_from_table(8, 100, TABLE) == (1, "narrow") and split_from_table(0, 8192, TABLE) == (1, "narrow")
    assert split_from_table(8, 8192, ()) == (1, "narrow")
    assert split_from_table(8, 0, TABLE) == (1, "narrow")  # an empty cache: one pass, nothing to split
    # a forced pipeline takes its own best count at the nearest point
    assert split_from_table(8, 8192, TABLE, "wide") == (8, "wide")
    assert split_from_table(64, 8192, TABLE, "narrow") == (2, "narrow")
    assert split_from_table(8, 200, TABLE, "wide") == (1, "wide")  # fewer than two wide tiles of keys
    # the best pipeline not available to the call: the narrow one
    assert split_from_table(8, 8192, TABLE, None, ("narrow", "wide")) == (26, "narrow")


def test_a_tuned_table_drives_the_plan_for_its_arch_only(monkeypatch):
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_90", {"table": TABLE})
    q, k = contiguous((1, 32, 128)), cache_slice(1, 8, 8192, 128, 8192)
    p = plan_decode(q, k, k, 8192, arch="sm_90")
    assert (p.num_splits, p.pipeline) == (16, "deep")
    assert plan_decode(q, k, k, 8192, arch="sm_00").num_splits == choose_splits(
        8, 8192, 132, dispatch.DECODE_SPLIT_DEFAULT)


def test_rule_from_the_dispatch_table_is_used_without_num_splits():
    p = plan(q=contiguous((1, 32, 128)), k=cache_slice(1, 8, 32768, 128, 33000),
             v=cache_slice(1, 8, 32768, 128, 33000, ptr=BASE * 4096), kv_lens=32768, sms=132, arch="sm_00")
    assert p.num_splits == choose_splits(8, 32768, 132, dispatch.DECODE_SPLIT_DEFAULT) > 1


def _bad(**changes):
    args = dict(q=contiguous((2, 8, 128)), k=cache_slice(2, 2, 256, 128, 512),
                v=cache_slice(2, 2, 256, 128, 512, ptr=BASE * 64), kv_lens=100)
    args.update(changes)
    return args


@pytest.mark.parametrize("changes, error, words", [
    (dict(q=contiguous((2, 8, 128), dtype="fp32")), TypeError, "float16 or bfloat16"),
    (dict(k=cache_slice(2, 2, 256, 128, 512, dtype="fp16")), TypeError, "q's dtype"),
    (dict(q=contiguous((2, 6, 128)), k=cache_slice(2, 4, 256, 128, 512), v=cache_slice(2, 4, 256, 128, 512)),
     ValueError, "multiple"),
    (dict(q=contiguous((2, 8, 48)), k=cache_slice(2, 2, 256, 48, 512), v=cache_slice(2, 2, 256, 48, 512)),
     ValueError, "head dim 48"),
    (dict(k=cache_slice(2, 2, 256, 64, 512), v=cache_slice(2, 2, 256, 64, 512, ptr=BASE * 64)), ValueError,
     "head dim 128"),
    (dict(k=cache_slice(3, 2, 256, 128, 512), v=cache_slice(3, 2, 256, 128, 512, ptr=BASE * 64)), ValueError,
     "batch"),
    (dict(v=cache_slice(2, 2, 255, 128, 512)), ValueError, "v_cache"),
    (dict(q=contiguous((2, 1024))), ValueError, "one query token"),
    (dict(q=contiguous((2, 2, 8, 128)), kv_lens=1), ValueError, r"kv_lens: the caches hold each row.s 2 new tokens"),
    (dict(k=contiguous((2, 256, 128))), ValueError, "4-d cache"),
    (dict(kv_lens=257), ValueError, "kv_lens"),
    (dict(kv_lens=-1), ValueError, "kv_lens"),
    (dict(kv_lens=1.5), TypeError, "kv_lens"),
    (dict(kv_lens=contiguous((2,), dtype="int64")), TypeError, "int32"),
    (dict(kv_lens=contiguous((3,), dtype="int32")), ValueError, "one per row"),
    (dict(kv_lens=contiguous((2,), dtype="int32", device=1)), ValueError, "device"),
    (dict(kv_lens=TensorInfo(BASE * 9000, (2,), (2,), "int32", 0)), ValueError, "kv_lens: expected a contiguous"),
    (dict(kv_start=TensorInfo(BASE * 9000, (2,), (0,), "int32", 0)), ValueError, "kv_start: expected a contiguous"),
    (dict(kv_start=101), ValueError, "kv_start"),
    (dict(kv_start=-2), ValueError, "kv_start"),
    (dict(kv_layout="bhds"), ValueError, "kv_layout"),
    (dict(softcap=-1.0), ValueError, "softcap"),
    (dict(scale=math.inf), TypeError, "scale"),
    (dict(num_splits=0), ValueError, "num_splits"),
    (dict(num_splits=65537), ValueError, "num_splits"),
    (dict(num_splits=2, batch_invariant=True), ValueError, "one or the other"),
    (dict(batch_invariant=1), TypeError, "batch_invariant"),
    (dict(k=TensorInfo(BASE, (2, 2, 2**31 - 1, 128), (0, 0, 0, 1), "bf16", 0),
          v=TensorInfo(BASE, (2, 2, 2**31 - 1, 128), (0, 0, 0, 1), "bf16", 0)), ValueError, "positions"),
    (dict(max_shared=99 * 1024, q=contiguous((2, 8, 256)), k=cache_slice(2, 2, 256, 256, 512),
          v=cache_slice(2, 2, 256, 256, 512, ptr=BASE * 64)), ValueError, "shared memory"),
    (dict(k=TensorInfo(BASE, (2, 2, 256, 128), (1, 1, 1, 1), "bf16", 1)), ValueError, "device"),
    (dict(out=contiguous((2, 8, 64))), ValueError, "out: expected q's shape"),
    (dict(out=contiguous((2, 8, 128), dtype="fp16")), TypeError, "out"),
    (dict(out=contiguous((2, 8, 128))), ValueError, "overlaps q"),
    (dict(out=TensorInfo(BASE * 9000, (2, 8, 128), (0, 128, 1), "bf16", 0)), ValueError, "broadcast"),
])
def test_bad_inputs(changes, error, words):
    args = _bad(**changes)
    with pytest.raises(error, match=words):
        plan_decode(args.pop("q"), args.pop("k"), args.pop("v"), args.pop("kv_lens"), **args)


def test_the_table_picks_the_pipeline_where_the_call_has_it(monkeypatch):
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_90", {"table": TABLE})
    q = contiguous((8, 32, 128))
    k, v = cache_slice(8, 8, 8192, 128, 8192), cache_slice(8, 8, 8192, 128, 8192, ptr=BASE * 4096)
    p = plan_decode(q, k, v, 8192, arch="sm_90")
    assert (p.pipeline, p.num_splits, p.attention.symbol) == ("wide", 2, "decode_bf16_d128_s3_v8_wide")
    assert p.attention.shared == dispatch.DECODE_SHARED[128, "wide", "same"]
    # no such variant (rows off 16-byte boundaries: the general kernel), or not the shared memory it takes: narrow,
    # its best count
    narrow = plan_decode(q, cache_slice(8, 8, 8192, 128, 8192, ptr=BASE + 8), v, 8192, arch="sm_90")
    assert (narrow.key[2:], narrow.num_splits) == ((4, 1, "narrow", "same", "fixed"), 2)
    small = plan_decode(q, k, v, 8192, arch="sm_90", max_shared=99 * 1024)
    assert (small.pipeline, small.attention.symbol) == ("narrow", "decode_bf16_d128_s3_v8")
    # num_splits given: narrow unless forced
    assert plan_decode(q, k, v, 8192, arch="sm_90", num_splits=3).pipeline == "narrow"
    assert plan_decode(q, k, v, 8192, arch="sm_90", num_splits=3, pipeline="deep").pipeline == "deep"
    assert plan_decode(q, k, v, 8192, arch="sm_90", pipeline="narrow").pipeline == "narrow"


def test_an_empty_cache_plans_one_pass_under_a_tuned_table(monkeypatch):
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_90", {"table": TABLE})
    q, k = contiguous((2, 8, 128)), cache_slice(2, 2, 0, 128, 64)
    p = plan_decode(q, k, k, 0, arch="sm_90")
    assert (p.num_splits, p.pipeline) == (1, "narrow")


def test_forcing_a_pipeline_the_call_cannot_take_is_an_error():
    with pytest.raises(ValueError, match="the wide pipeline needs"):
        plan(k=cache_slice(2, 2, 256, 128, 512, ptr=BASE + 8), pipeline="wide")
    q, k = contiguous((1, 8, 256)), cache_slice(1, 2, 256, 256, 256)
    with pytest.raises(ValueError, match="head dim 256"):
        plan_decode(q, k, k, 100, pipeline="deep")
    with pytest.raises(ValueError, match="pipeline: expected one of"):
        plan(pipeline="fast")


# --- batch-invariant mode ----------------------------------------------------------------------------------------

def test_invariant_splits_follow_the_row_length_rule():
    rule = decode_abi.INVARIANT_SPLITS
    assert [invariant_splits(n) for n in (0, 1, 2048, 2049, 8192, 8193, 10**6)] == [1, 1, 1, 2, 2, 16, 16]
    assert rule[-1][0] is None and [n for _, n in rule] == sorted(n for _, n in rule)  # monotonic: capacity bounds
    assert rule == dispatch.DECODE_INVARIANT_SPLITS


def _invariant(capacity, b=2, **kw):
    k = cache_slice(b, 2, capacity, 128, capacity + 64)
    v = cache_slice(b, 2, capacity, 128, capacity + 64, ptr=BASE * 4096)
    return plan(q=contiguous((b, 8, 128)), k=k, v=v, kv_lens=capacity, batch_invariant=True, **kw)


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", None])
def test_batch_invariant_sizes_the_grid_by_capacity_never_by_the_batch(arch, monkeypatch):
    # a tuned table that would pick other counts and pipelines per grid: ignored in this mode
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_90", {"table": ((8, 512, 2, 5, 5, 5),)})
    for capacity in (100, 2048, 2049, 8192, 8193, 40000):
        plans = [_invariant(capacity, b=b, arch=arch) for b in (1, 8, 128)]
        splits = invariant_splits(capacity)
        for p in plans:
            # ws where the GPU maps tensors, else deep
            assert p.num_splits == p.attention.grid[0] == splits and p.pipeline == ("ws" if arch == "sm_90" else "deep")
            assert p.fields["batch_invariant"] == 1
            clustered = 1 < splits <= MAX_CLUSTER_SPLITS and arch == "sm_90"
            assert p.attention.cluster == (splits if clustered else 1)
            if splits > 1 and not clustered:  # the combine kernel merges with the cluster's arithmetic
                combine = dict(zip(p.combine.field_names, p.values(out=1, lse=0)[1]))
                assert combine["batch_invariant"] == 1 and combine["num_splits"] == splits
            else:
                assert p.combine is None
        assert len({p.attention.symbol for p in plans}) == 1


def test_batch_invariant_falls_back_to_narrow_tiles_and_keeps_a_forced_pipeline():
    k = TensorInfo(BASE, (2, 2, 3000, 128), (2 * 3000 * 129, 3000 * 129, 129, 1), "bf16", 0)  # odd rows: 1 per copy
    v = TensorInfo(BASE * 4096, (2, 2, 3000, 128), (2 * 3000 * 129, 3000 * 129, 129, 1), "bf16", 0)
    p = plan(k=k, v=v, kv_lens=3000, batch_invariant=True)
    assert p.pipeline == "narrow" and p.num_splits == 2
    assert _invariant(3000, pipeline="narrow").pipeline == "narrow"


def test_the_default_mode_writes_the_flag_off():
    p = plan(num_splits=MAX_CLUSTER_SPLITS + 1)
    assert p.fields["batch_invariant"] == 0
    assert dict(zip(p.combine.field_names, p.values(out=1, lse=0)[1]))["batch_invariant"] == 0


# --- the ws pipeline ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ws", "ws_deep"])
def test_ws_pipelines_from_sm_90_on_with_a_producer_warp(name):
    for splits in (1, 4, MAX_CLUSTER_SPLITS + 1):
        p = plan(num_splits=splits, pipeline=name, arch="sm_90")
        assert p.key == ("bf16", 128, 3, 8, name, "same", "fixed") and p.attention.symbol == f"decode_bf16_d128_s3_v8_{name}"
        assert p.attention.block == (dispatch.DECODE_THREADS[name], 1, 1) == (160, 1, 1)
        # splits merge in a cluster as the other pipelines' do, or by the combine kernel beyond a cluster's
        clustered = 1 < splits <= MAX_CLUSTER_SPLITS
        assert p.attention.cluster == (splits if clustered else 1)
        assert (p.combine is not None) == (splits > 1 and not clustered)
        assert p.attention.field_names[:2] == ("k_map", "v_map")
        assert p.fields["k_map"] == p.fields["v_map"] == b""  # the runtime's per call (packed as 128 zero bytes)
    for arch in ("sm_80", "sm_86", None):
        with pytest.raises(ValueError, match="sm_90 or newer"):
            plan(num_splits=1, pipeline=name, arch=arch)
    # no map of an empty cache: the table's other pipelines serve it
    empty = cache_slice(2, 2, 0, 128, 512)
    with pytest.raises(ValueError, match=f"{name} pipeline"):
        plan(k=empty, v=empty, kv_lens=0, num_splits=1, pipeline=name, arch="sm_90")


@pytest.mark.parametrize("name", ["ws", "ws_deep"])
def test_the_table_picks_ws_only_where_the_gpu_maps_tensors(name, monkeypatch):
    point = (16, 2048, PIPELINES_ORDER.index(name), 4, 4, 4, 2, 1)  # ws: 2 splits, ws_deep: 1
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_90", {"table": (point,)})
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_80", {"table": (point,)})
    k = cache_slice(2, 8, 2048, 128, 2100)
    v = cache_slice(2, 8, 2048, 128, 2100, ptr=BASE * 4096)
    q = contiguous((2, 32, 128))
    p = plan(q=q, k=k, v=v, kv_lens=2048, arch="sm_90")
    splits = 2 if name == "ws" else 1
    assert p.pipeline == name and p.num_splits == p.attention.cluster == splits and p.combine is None
    assert plan(q=q, k=k, v=v, kv_lens=2048, arch="sm_80").pipeline == "narrow"


def test_a_steps_attention_takes_ws_where_the_table_picks_ws_deep(monkeypatch):
    point = (16, 2048, PIPELINES_ORDER.index("ws_deep"), 4, 4, 4, 3, 2)  # ws: 3 splits, ws_deep: 2
    monkeypatch.setitem(dispatch.DECODE_SPLIT, "sm_90", {"table": (point,)})
    k = cache_slice(2, 8, 2048, 128, 2100)
    v = cache_slice(2, 8, 2048, 128, 2100, ptr=BASE * 4096)
    q = contiguous((2, 32, 128))
    attention, step = (plan(q=q, k=k, v=v, kv_lens=2048, arch="sm_90", for_step=s) for s in (False, True))
    assert (attention.pipeline, attention.num_splits) == ("ws_deep", 2)
    assert (step.pipeline, step.num_splits) == ("ws", 3)
    # a forced pipeline is the caller's: a step keeps it
    assert plan(q=q, k=k, v=v, kv_lens=2048, arch="sm_90", for_step=True, pipeline="ws_deep").pipeline == "ws_deep"


def test_batch_invariant_runs_a_forced_pipeline_of_alike_tiles():
    ws, deep = (_invariant(3000, pipeline=p, arch="sm_90") for p in ("ws", "deep"))
    assert (ws.pipeline, deep.pipeline) == ("ws", "deep")
    assert ws.num_splits == deep.num_splits == invariant_splits(3000) == ws.attention.cluster == deep.attention.cluster
    assert INVARIANT_PIPELINES == ("ws", "deep", "narrow")  # every pipeline of 64-key tiles; wide's differ


def test_ws_needs_positive_strides_for_its_tensor_maps():
    broadcast = TensorInfo(BASE, (2, 2, 256, 128), (0, 512 * 128, 128, 1), "bf16", 0)  # k.expand over the batch
    with pytest.raises(ValueError, match="ws pipeline"):
        plan(k=broadcast, v=broadcast, num_splits=1, pipeline="ws", arch="sm_90")
    assert plan(k=broadcast, v=broadcast, num_splits=1, arch="sm_90").pipeline != "ws"


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_launch_values_put_a_ws_plans_tensor_maps_of_its_own_caches_first(layout, monkeypatch):
    from cukiln import decode_api

    encoded = []

    def fake_tensor_map(dtype, ptr, dims, strides_bytes, box, swizzled=True, *, l2_promotion):
        encoded.append((dtype, ptr, dims, strides_bytes, box, l2_promotion))
        return bytes([len(encoded)]) * 128

    monkeypatch.setattr(decode_api, "tensor_map", fake_tensor_map)
    h_kv, group, T, cap = 2, 20, 300, 512  # a GQA group above 16 query heads: two blocks per KV head
    k = cache_slice(3, h_kv, T, 128, cap, layout=layout)
    v = cache_slice(3, h_kv, T, 128, cap, layout=layout, ptr=BASE * 4096)
    p = plan(q=contiguous((3, h_kv * group, 128)), k=k, v=v, kv_lens=T, kv_layout=layout, num_splits=2,
             pipeline="ws", arch="sm_90")
    attention, combine = decode_api.launch_values(p, out=7, lse=0, partial_out=8, partial_lse=9)
    assert attention[:2] == (bytes([1]) * 128, bytes([2]) * 128)
    assert attention[2:] == p.values(out=7, lse=0, partial_out=8, partial_lse=9)[0][2:]
    strides = (128 * 2, cap * 128 * 2, h_kv * cap * 128 * 2) if layout == "bhsd" else \
        (h_kv * 128 * 2, 128 * 2, cap * h_kv * 128 * 2)
    assert encoded == [("bf16", ptr, (128, T, h_kv, 3), strides, (64, 64, 1, 1), dispatch.DECODE_WS_L2_PROMOTION)
                       for ptr in (BASE, BASE * 4096)]
    narrow = plan(q=contiguous((3, h_kv * group, 128)), k=k, v=v, kv_lens=T, kv_layout=layout, num_splits=2)
    assert decode_api.launch_values(narrow, out=7, lse=0) == narrow.values(out=7, lse=0) and len(encoded) == 2


def _fp8_plan(group: int, d: int = 128, arch: str = "sm_90", **kw):
    q = contiguous((2, 2 * group, d))
    k = cache_slice(2, 2, 256, d, 512, dtype="e4m3")
    v = cache_slice(2, 2, 256, d, 512, ptr=BASE * 64, dtype="e4m3")
    return plan_decode(q, k, v, 100, arch=arch, **kw)


def test_fp8_caches_take_ws_at_head_dim_128_for_groups_of_8_heads_or_fewer():
    p = _fp8_plan(4, pipeline="ws", num_splits=1)
    assert p.key[4:6] == ("ws", "e4m3") and p.reads_tensor_maps
    assert p.attention.shared == dispatch.DECODE_SHARED[128, "ws", "e4m3"]
    assert p.attention.block == (dispatch.DECODE_THREADS["ws"], 1, 1)
    assert _fp8_plan(dispatch.DECODE_FP8_WS_MAX_GROUP, pipeline="ws", num_splits=1).pipeline == "ws"
    # larger groups are computed with heads as rows, which the FP8 ws kernel does not do: narrow, and a forced ws says so
    assert _fp8_plan(12, num_splits=1).pipeline == "narrow"
    with pytest.raises(ValueError, match="1 query tokens x groups of 12"):
        _fp8_plan(12, pipeline="ws", num_splits=1)
    # no FP8 kernel of ws_deep, nor of ws at other head dims
    with pytest.raises(ValueError, match="pipeline: the ws_deep pipeline"):
        _fp8_plan(4, pipeline="ws_deep", num_splits=1)
    with pytest.raises(ValueError, match="pipeline: the ws pipeline"):
        _fp8_plan(4, d=64, pipeline="ws", num_splits=1)
    # before sm_90, no tensor maps: the narrow rings
    assert _fp8_plan(4, arch="sm_80", num_splits=1).pipeline == "narrow"


def test_query_tokens_take_every_pipeline_and_fp8_ws_blocks_of_8_rows_or_fewer():
    """A row's n tokens x the group's heads packed in a block: the ws pipelines serve them as narrow does (their kernels
    take the tokens' fields); over FP8 caches ws's blocks hold 8 query rows at most, so n x group <= 8 there."""
    for pipeline in ("narrow", "ws", "ws_deep"):
        q = contiguous((2, 4, 8, 128))  # 4 tokens a row, GQA 8/2: 16 query rows a KV head
        p = plan_decode(q, cache_slice(2, 2, 256, 128, 512), cache_slice(2, 2, 256, 128, 512, ptr=BASE * 64), 100,
                        arch="sm_90", pipeline=pipeline, num_splits=1)
        assert p.pipeline == pipeline and p.tokens == 4 and p.attention.grid == (1, 2, 2)
        assert {"q_lens", "queries"} <= set(p.attention.field_names) and p.fields["queries"] == 4
    fp8 = dict(dtype="e4m3")
    k, v = cache_slice(2, 2, 256, 128, 512, **fp8), cache_slice(2, 2, 256, 128, 512, ptr=BASE * 64, **fp8)
    assert plan_decode(contiguous((2, 2, 8, 128)), k, v, 100, arch="sm_90", pipeline="ws").pipeline == "ws"
    with pytest.raises(ValueError, match="3 query tokens x groups of 4"):
        plan_decode(contiguous((2, 3, 8, 128)), k, v, 100, arch="sm_90", pipeline="ws")
    assert plan_decode(contiguous((2, 3, 8, 128)), k, v, 100, arch="sm_90", num_splits=1).pipeline == "narrow"
