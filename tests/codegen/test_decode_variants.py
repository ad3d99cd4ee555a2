"""The decode-attention variant space: enumeration, each pruning rule, names that parse back."""

from __future__ import annotations

import itertools

import pytest

from cukiln.codegen import decode_variants as D
from cukiln.codegen.axes import VECTOR_WIDTHS, Dtype, rule_general_strides_are_scalar, rule_vector_fits_16_bytes

ALL = list(D.enumerate_decode())
ATTENTION = [v for v in ALL if isinstance(v, D.DecodeVariant)]


def test_enumeration_is_every_combination_the_rules_keep():
    combos = itertools.product(D.DECODE_DTYPES, D.HEAD_DIMS, D.KV_STRIDE_COUNTS, VECTOR_WIDTHS + (D.FP8_COPY_ELEMS,),
                               D.PIPELINES, D.CACHES, D.FORMS)
    kept = [D.DecodeVariant(*c) for c in combos if D.decode_rejection(D.DecodeVariant(*c)) is None]
    assert sorted(ATTENTION) == sorted(kept)
    # 3 strides: 16-byte copies; 4 strides: scalar only; deep and wide pipelines: 16-byte copies of head dims 64-128;
    # ws and ws_deep: 16-byte copies of head dims 64 and 128; FP8 caches: the narrow pipeline's 16-byte copies of
    # every head dim but 80, and ws's at head dim 128; paged pools: the narrow pipeline's 16-byte copies,
    # of both caches, and ws_deep's of 16-bit caches at head dims 64 and 128
    assert len(ATTENTION) == 2 * 6 * (1 + 1) + 2 * 2 * 4 + 2 * 2 * 2 + 2 * (5 + 1) + 2 * (6 + 5) + 2 * 2


def test_contiguous_rows_copy_16_bytes_and_any_other_alignment_takes_the_general_kernel():
    narrow = {(v.strides, v.vec) for v in ATTENTION if v.cache is D.Cache.SAME and v.pipeline is D.Pipeline.NARROW}
    assert narrow == {(3, 8), (4, 1)}
    for vec in (1, 2, 4):
        assert D.rule_decode_contiguous_rows_copy_16_bytes(D.DecodeVariant(Dtype.FP16, 128, 3, vec))
    assert D.rule_decode_contiguous_rows_copy_16_bytes(D.DecodeVariant(Dtype.FP16, 128, 4, 1)) is None
    assert D.rule_decode_contiguous_rows_copy_16_bytes(
        D.DecodeVariant(Dtype.FP16, 128, 3, 16, cache=D.Cache.E4M3)) is None


def test_paged_pools_on_the_narrow_and_ws_pipelines_with_16_byte_copies_only():
    paged = {(v.dtype, v.head_dim, v.strides, v.vec, v.pipeline, v.cache) for v in ATTENTION if v.paged}
    assert paged == ({(t, d, 3, 8, D.Pipeline.NARROW, D.Cache.SAME) for t in D.DECODE_DTYPES for d in D.HEAD_DIMS}
                     | {(t, d, 3, 8, D.Pipeline.WS_DEEP, D.Cache.SAME) for t in D.DECODE_DTYPES for d in (64, 128)}
                     | {(t, d, 3, 16, D.Pipeline.NARROW, D.Cache.E4M3) for t in D.DECODE_DTYPES
                        for d in (64, 96, 128, 192, 256)})
    assert D.rule_decode_paged_on_the_bandwidth_path(D.DecodeVariant(Dtype.BF16, 128, 3, 4, form=D.Form.PAGED))
    for pipeline in (D.Pipeline.DEEP, D.Pipeline.WIDE, D.Pipeline.WS):
        assert D.rule_decode_paged_on_the_bandwidth_path(
            D.DecodeVariant(Dtype.BF16, 128, 3, 8, pipeline, form=D.Form.PAGED))
    assert D.rule_decode_paged_on_the_bandwidth_path(
        D.DecodeVariant(Dtype.BF16, 128, 3, 8, D.Pipeline.WS_DEEP, form=D.Form.PAGED)) is None
    assert D.parse_decode_name("decode_bf16_d128_s3_v8_ws_deep_paged") == D.DecodeVariant(
        Dtype.BF16, 128, 3, 8, D.Pipeline.WS_DEEP, form=D.Form.PAGED)
    name = "decode_bf16_d128_s3_v16_e4m3_paged"
    assert D.parse_decode_name(name) == D.DecodeVariant(Dtype.BF16, 128, 3, 16, cache=D.Cache.E4M3, form=D.Form.PAGED)
    assert D.parse_decode_name(name).module == "decode_bf16_e4m3_paged"


def test_fp8_caches_on_the_narrow_pipeline_and_at_head_dim_128_the_ws_one():
    fp8 = {(v.dtype, v.head_dim, v.strides, v.vec, v.pipeline)
           for v in ATTENTION if v.cache is D.Cache.E4M3 and not v.paged}
    assert fp8 == ({(t, d, 3, 16, D.Pipeline.NARROW) for t in D.DECODE_DTYPES for d in (64, 96, 128, 192, 256)}
                   | {(t, 128, 3, 16, D.Pipeline.WS) for t in D.DECODE_DTYPES})
    assert D.rule_decode_fp8_on_the_bandwidth_path(D.DecodeVariant(Dtype.BF16, 80, 3, 16, cache=D.Cache.E4M3))
    assert D.rule_decode_fp8_on_the_bandwidth_path(D.DecodeVariant(Dtype.BF16, 128, 3, 16, D.Pipeline.DEEP,
                                                                   D.Cache.E4M3))
    assert D.rule_decode_fp8_on_the_bandwidth_path(D.DecodeVariant(Dtype.BF16, 64, 3, 16, D.Pipeline.WS, D.Cache.E4M3))
    assert D.rule_decode_fp8_on_the_bandwidth_path(D.DecodeVariant(Dtype.BF16, 128, 3, 16, D.Pipeline.WS_DEEP,
                                                                   D.Cache.E4M3))
    assert D.rule_decode_fp8_on_the_bandwidth_path(D.DecodeVariant(Dtype.BF16, 128, 3, 16, D.Pipeline.WS,
                                                                   D.Cache.E4M3, D.Form.PAGED))
    name = "decode_bf16_d128_s3_v16_e4m3"
    assert D.parse_decode_name(name) == D.DecodeVariant(Dtype.BF16, 128, 3, 16, cache=D.Cache.E4M3)
    assert D.parse_decode_name("decode_fp16_d128_s3_v16_ws_e4m3") == D.DecodeVariant(
        Dtype.FP16, 128, 3, 16, D.Pipeline.WS, D.Cache.E4M3)
    with pytest.raises(ValueError):
        D.parse_decode_name("decode_bf16_d128_s3_v8_e4m3")


@pytest.mark.parametrize("pipeline", [D.Pipeline.WS, D.Pipeline.WS_DEEP])
def test_ws_pipelines_load_whole_64_column_boxes(pipeline):
    ws = {(v.dtype, v.head_dim, v.strides, v.vec) for v in ATTENTION if v.pipeline is pipeline
          and v.cache is D.Cache.SAME}
    assert ws == {(t, d, 3, 8) for t in D.DECODE_DTYPES for d in (64, 128)}
    assert pipeline.warp_specialized and not D.Pipeline.DEEP.warp_specialized
    assert D.rule_decode_ws_whole_boxes(D.DecodeVariant(Dtype.BF16, 96, 3, 8, pipeline))
    name = f"decode_fp16_d64_s3_v8_{pipeline.value}"
    assert D.parse_decode_name(name) == D.DecodeVariant(Dtype.FP16, 64, 3, 8, pipeline)


@pytest.mark.parametrize("pipeline", [D.Pipeline.DEEP, D.Pipeline.WIDE])
def test_deep_and_wide_pipelines_only_on_the_bandwidth_path(pipeline):
    fast = {(v.dtype, v.head_dim, v.strides, v.vec) for v in ATTENTION if v.pipeline is pipeline}
    assert fast == {(t, d, 3, 8) for t in D.DECODE_DTYPES for d in (64, 80, 96, 128)}
    rule = D.rule_decode_fast_pipelines_on_the_bandwidth_path
    assert rule(D.DecodeVariant(Dtype.BF16, 192, 3, 8, pipeline))
    assert rule(D.DecodeVariant(Dtype.BF16, 128, 3, 4, pipeline))
    assert rule(D.DecodeVariant(Dtype.BF16, 128, 4, 1, pipeline))
    assert rule(D.DecodeVariant(Dtype.BF16, 128, 3, 8, pipeline)) is None


def test_one_combine_kernel_per_dtype_and_head_dim_serves_the_attention_variants():
    combines = [v for v in ALL if isinstance(v, D.DecodeCombineVariant)]
    assert {(c.dtype, c.head_dim) for c in combines} == set(itertools.product(D.DECODE_DTYPES, D.HEAD_DIMS))
    for v in ATTENTION:
        assert v.combine in combines and (v.combine.dtype, v.combine.head_dim) == (v.dtype, v.head_dim)


def test_rules_name_what_they_reject():
    assert rule_general_strides_are_scalar(D.DecodeVariant(Dtype.BF16, 128, 4, 2))
    assert rule_general_strides_are_scalar(D.DecodeVariant(Dtype.BF16, 128, 4, 1)) is None
    assert rule_vector_fits_16_bytes(D.DecodeVariant(Dtype.BF16, 128, 3, 16))
    assert D.rule_decode_vector_divides_head_dim(D.DecodeVariant(Dtype.BF16, 84, 3, 8))


@pytest.mark.parametrize("v", ALL, ids=lambda v: v.name)
def test_names_round_trip_and_are_c_identifiers(v):
    assert D.parse_decode_name(v.name) == v
    assert v.name.isidentifier()
    kind = "merge_" if v.op == "decode_merge" else ""
    assert v.module == (f"decode_{kind}{v.dtype.value}" + ("_e4m3" if getattr(v, "cache", None) is D.Cache.E4M3 else "")
                        + ("_paged" if getattr(v, "paged", False) else ""))


@pytest.mark.parametrize("name", ["decode_fp32_d128_s3_v8", "decode_bf16_d100_s3_v8",
                                  "decode_bf16_d128_s4_v8", "decode_bf16_d128_s3_v8_split",
                                  "decode_bf16_d128_s3_v8_narrow", "decode_bf16_d128_s3_v8_k128", "decode_bf16_d256_s3_v8_wide",
                                  "decode_bf16_d128_s3_v4_deep", "decode_bf16_d128_s3_v4", "decode_bf16_d128_s3_v1",
                                  "decode_combine_bf16_d100",
                                  "rope_bf16_dense_half_freqs_s3_v8"])
def test_bad_names_are_rejected(name):
    with pytest.raises(ValueError):
        D.parse_decode_name(name)
