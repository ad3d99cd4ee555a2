"""kv_append's variant space: every valid combination, the rules, names that parse back, its parameter struct."""

from __future__ import annotations

import itertools

import pytest

from cukiln.codegen import axes
from cukiln.codegen import kv_append_family as K
from cukiln.codegen.rope_variants import Angles, Pairing


def test_enumeration_is_exactly_the_unpruned_combinations():
    every = [K.KvAppendVariant(*c) for c in itertools.product(axes.Dtype, Pairing, Angles, axes.VECTOR_WIDTHS)]
    valid = [v for v in every if K.rejection(v) is None]
    assert list(K.enumerate_kv_append()) == valid and len(valid) == 80
    removed = [v for v in every if K.rejection(v) is not None]
    for rule in K.RULES:
        assert any(rule(v) for v in removed), f"{rule.__name__} removes nothing"
    assert {v.dtype for v in valid} == {axes.Dtype.FP16, axes.Dtype.BF16}


def test_names_round_trip_and_modules_split_by_dtype():
    for v in K.enumerate_kv_append():
        assert K.parse_kv_append_name(v.name) == v and v.name.isidentifier()
        assert v.module == f"kv_append_{v.dtype.value}"
    v = K.parse_kv_append_name("kv_append_bf16_half_cossinf32_v8")
    assert (v.pairing, v.angles, v.vec) == (Pairing.HALF, Angles.COS_SIN_F32, 8)


@pytest.mark.parametrize("bad", ["kv_append_fp32_half_base_v4", "kv_append_bf16_half_base_v16",
                                 "kv_append_fp16_half_cossinf32_v16", "kv_append_bf16_whole_base_v8", "rope_bf16"])
def test_bad_names_are_rejected(bad):
    with pytest.raises(ValueError):
        K.parse_kv_append_name(bad)


def test_params_carry_the_caches_the_lengths_and_the_angle_source():
    v = K.parse_kv_append_name("kv_append_fp16_interleaved_cossin_v4")
    names = [f for _, f in K.kv_append_params(v)]
    assert len(names) == len(set(names))
    assert {"k_cache", "v_cache", "kv_lens", "kv_start", "capacity", "k_cache_ss", "cos", "per_pair"} <= set(names)
