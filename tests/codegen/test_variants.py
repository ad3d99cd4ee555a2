"""The variant space: enumeration, every pruning rule, stable names that parse back."""

from __future__ import annotations

import itertools

import pytest

from cukiln.codegen import axes, rope_variants as V


def all_combinations():
    for combo in itertools.product(axes.Dtype, V.Layout, V.Pairing, V.Angles, V.STRIDE_COUNTS,
                                   axes.VECTOR_WIDTHS, V.Dispatch, V.TENSOR_COUNTS, (False, True)):
        yield V.RopeVariant(*combo)


def test_enumeration_is_exactly_the_unpruned_combinations():
    valid = [v for v in all_combinations() if V.rejection(v) is None]
    assert list(V.enumerate_rope()) == valid
    assert len(valid) == len(set(valid))
    # the count the README and the report give: a rule that pruned more (or less) than it should moves it
    assert len(valid) == 552


@pytest.mark.parametrize("v", list(V.enumerate_rope())[:: 7], ids=lambda v: v.name)
def test_names_round_trip(v):
    assert V.parse_rope_name(v.name) == v


def test_names_are_unique_and_are_c_identifiers():
    names = [v.name for v in V.enumerate_rope()]
    assert len(names) == len(set(names))
    assert all(n.isidentifier() for n in names)
    assert all(V.parse_rope_name(n).name == n for n in names)


def test_vector_fits_16_bytes_rule():
    v = V.RopeVariant(axes.Dtype.FP32, V.Layout.DENSE, V.Pairing.HALF, V.Angles.FREQS, 3, 8)
    assert axes.rule_vector_fits_16_bytes(v)
    assert axes.rule_vector_fits_16_bytes(V.RopeVariant(*(list(vars(v).values())[:5] + [4]))) is None
    assert not axes.rule_vector_fits_16_bytes(V.RopeVariant(*(list(vars(v).values())[:5] + [4])))
    assert not any(x.vec * x.dtype.itemsize > 16 for x in V.enumerate_rope())


def test_four_strides_only_scalar_rule():
    v = V.RopeVariant(axes.Dtype.BF16, V.Layout.DENSE, V.Pairing.HALF, V.Angles.BASE, 4, 2)
    assert axes.rule_general_strides_are_scalar(v)
    assert {x.vec for x in V.enumerate_rope() if x.strides == 4} == {1}


def test_fp32_cache_angle_source_only_for_half_types_rule():
    v = V.RopeVariant(axes.Dtype.FP32, V.Layout.DENSE, V.Pairing.HALF, V.Angles.COS_SIN_F32, 0, 1)
    assert V.rule_f32_cache_only_for_half_types(v)
    assert not any(x.angles is V.Angles.COS_SIN_F32 and x.dtype is axes.Dtype.FP32 for x in V.enumerate_rope())


def test_16_byte_kernels_take_one_source_and_narrower_ones_any_rule():
    wide = V.RopeVariant(axes.Dtype.BF16, V.Layout.DENSE, V.Pairing.HALF, V.Angles.ANY, 0, 8)
    narrow = V.RopeVariant(axes.Dtype.FP32, V.Layout.DENSE, V.Pairing.HALF, V.Angles.FREQS, 0, 2)
    assert V.rule_source_at_run_time_below_16_bytes(wide)
    assert V.rule_source_at_run_time_below_16_bytes(narrow)
    for v in V.enumerate_rope():
        assert (v.angles is V.Angles.ANY) == (v.vec * v.dtype.itemsize < 16), v.name


def test_a_kernel_of_any_source_serves_each_source_valid_for_its_element_type():
    any_fp32 = V.RopeVariant(axes.Dtype.FP32, V.Layout.DENSE, V.Pairing.HALF, V.Angles.ANY, 0, 2)
    any_bf16 = V.RopeVariant(axes.Dtype.BF16, V.Layout.DENSE, V.Pairing.HALF, V.Angles.ANY, 0, 2)
    assert V.sources_served(any_bf16) == V.SOURCES
    assert V.sources_served(any_fp32) == tuple(a for a in V.SOURCES if a is not V.Angles.COS_SIN_F32)
    one = V.RopeVariant(axes.Dtype.BF16, V.Layout.DENSE, V.Pairing.HALF, V.Angles.BASE, 0, 8)
    assert V.sources_served(one) == (V.Angles.BASE,)


def test_every_rule_removes_something_and_nothing_else_is_removed():
    removed = [v for v in all_combinations() if V.rejection(v) is not None]
    for rule in V.RULES:
        assert any(rule(v) for v in removed), f"{rule.__name__} removes nothing"
    assert all(any(rule(v) for rule in V.RULES) for v in removed)


def test_dispatch_only_for_thd_rule():
    dense = V.RopeVariant(axes.Dtype.BF16, V.Layout.DENSE, V.Pairing.HALF, V.Angles.FREQS, 3, 8,
                          V.Dispatch.TOKEN)
    thd = V.RopeVariant(axes.Dtype.BF16, V.Layout.THD, V.Pairing.HALF, V.Angles.FREQS, 3, 8)
    assert V.rule_dispatch_only_for_thd(dense) and V.rule_dispatch_only_for_thd(thd)
    counts = {}
    for v in V.enumerate_rope():
        if v.tensors == 1 and not v.mrope:
            counts[(v.layout, v.dispatch)] = counts.get((v.layout, v.dispatch), 0) + 1
    # every thd combination comes as a token and a grid variant, each as many as the dense ones
    assert counts == {(V.Layout.DENSE, V.Dispatch.NONE): counts[(V.Layout.DENSE, V.Dispatch.NONE)],
                      (V.Layout.THD, V.Dispatch.TOKEN): counts[(V.Layout.DENSE, V.Dispatch.NONE)],
                      (V.Layout.THD, V.Dispatch.GRID): counts[(V.Layout.DENSE, V.Dispatch.NONE)]}


def test_thd_names_carry_the_dispatch_and_modules_split_by_it():
    v = V.parse_rope_name("rope_fp16_thd_interleaved_base_s0_v8_token")
    assert (v.layout, v.dispatch) == (V.Layout.THD, V.Dispatch.TOKEN)
    assert v.module == "rope_fp16_thd_token"
    assert V.parse_rope_name("rope_bf16_dense_half_freqs_s3_v8").module == "rope_bf16"
    assert v.key == ("fp16", "thd", "interleaved", "base", 0, 8, "token", 1, False)


@pytest.mark.parametrize("bad", ["rope_fp32_dense_half_freqs_s3_v8", "rope_fp64_dense_half_freqs_s3_v1",
                                 "rope_bf16_dense_half_freqs_s3_v8_token", "rope_bf16_thd_half_freqs_s3_v8",
                                 "rope_fp32_dense_half_freqs_s5_v1", "rope_fwd_bf16_dense_half_freqs_s3_v8",
                                 "attention_fwd"])
def test_bad_names_are_rejected(bad):
    with pytest.raises(ValueError):
        V.parse_rope_name(bad)


def test_axes_are_json_friendly():
    v = next(V.enumerate_rope())
    assert v.axes() == {"dtype": "fp32", "layout": "dense", "pairing": "half",
                        "angles": "freqs", "strides": 0, "vec": 4, "dispatch": "none", "tensors": 1, "mrope": False}


def test_m_rope_variants_are_the_dense_ones_in_modules_of_their_own():
    sectioned = [v for v in V.enumerate_rope() if v.mrope]
    plain_dense = [v for v in V.enumerate_rope() if v.layout is V.Layout.DENSE and not v.mrope]
    assert sorted(v.key[:-1] for v in sectioned) == sorted(v.key[:-1] for v in plain_dense)
    v = V.parse_rope_name("rope_bf16_dense_half_invfreq_s0_v8_qk_mrope")
    assert (v.tensors, v.mrope, v.module) == (2, True, "rope_bf16_mrope")
    thd = V.RopeVariant(axes.Dtype.BF16, V.Layout.THD, V.Pairing.HALF, V.Angles.BASE, 0, 8, V.Dispatch.TOKEN, 1, True)
    assert V.rule_mrope_for_dense_rows(thd)
    with pytest.raises(ValueError, match="pruned"):
        V.parse_rope_name("rope_bf16_thd_half_base_s0_v8_token_mrope")


def test_two_tensor_variants_exist_for_dense_rows_only_and_name_themselves():
    pairs = [v for v in V.enumerate_rope() if v.tensors == 2]
    assert pairs and all(v.layout is V.Layout.DENSE and v.strides in (0, 3) for v in pairs)
    assert {(v.dtype, v.pairing, v.angles, v.strides, v.vec) for v in pairs} == {
        (v.dtype, v.pairing, v.angles, v.strides, v.vec) for v in V.enumerate_rope()
        if v.tensors == 1 and v.layout is V.Layout.DENSE and v.strides in (0, 3)}
    v = V.parse_rope_name("rope_bf16_dense_half_freqs_s3_v8_qk")
    assert v.tensors == 2 and v.name == "rope_bf16_dense_half_freqs_s3_v8_qk" and v.module == "rope_bf16"
    assert V.rule_two_tensors_for_dense_rows(V.RopeVariant(axes.Dtype.BF16, V.Layout.THD, V.Pairing.HALF,
                                                           V.Angles.FREQS, 3, 8, V.Dispatch.TOKEN, 2))
    with pytest.raises(ValueError):
        V.parse_rope_name("rope_bf16_dense_half_freqs_s4_v1_qk")
