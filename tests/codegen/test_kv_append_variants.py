"""kv_append's variant space: every valid combination, the rules, names that parse back, its parameter struct."""

from __future__ import annotations

import itertools

import pytest

from cukiln.codegen import axes
from cukiln.codegen import kv_append_family as K
from cukiln.codegen.rope_variants import Angles, Pairing


def test_enumeration_is_exactly_the_unpruned_combinations():
    every = [K.KvAppendVariant(*c) for c in itertools.product(axes.Dtype, Pairing, Angles, axes.VECTOR_WIDTHS,
                                                              (False, True))]
    valid = [v for v in every if K.rejection(v) is None]
    assert list(K.enumerate_kv_append()) == valid and len(valid) == 32
    assert sum(v.qk_norm for v in valid) == 16  # QK-norm doubles every combination
    assert {v.angles for v in valid} == {Angles.ANY}  # one kernel takes every angle source
    removed = [v for v in every if K.rejection(v) is not None]
    for rule in K.RULES:
        assert any(rule(v) for v in removed), f"{rule.__name__} removes nothing"
    assert {v.dtype for v in valid} == {axes.Dtype.FP16, axes.Dtype.BF16}


def test_names_round_trip_and_modules_split_by_dtype_and_qk_norm():
    for v in K.enumerate_kv_append():
        assert K.parse_kv_append_name(v.name) == v and v.name.isidentifier()
        assert v.module == f"kv_append_{v.dtype.value}" + ("_qknorm" if v.qk_norm else "")
    v = K.parse_kv_append_name("kv_append_bf16_half_any_v8")
    assert (v.pairing, v.angles, v.vec, v.qk_norm) == (Pairing.HALF, Angles.ANY, 8, False)
    assert K.parse_kv_append_name("kv_append_bf16_half_any_v8_qknorm").qk_norm


@pytest.mark.parametrize("bad", ["kv_append_fp32_half_any_v4", "kv_append_bf16_half_any_v16",
                                 "kv_append_bf16_half_base_v8", "kv_append_bf16_whole_any_v8", "rope_bf16",
                                 "kv_append_bf16_half_any_v8_norm", "kv_append_bf16_half_any_v8_qknorm_qknorm"])
def test_bad_names_are_rejected(bad):
    with pytest.raises(ValueError):
        K.parse_kv_append_name(bad)


def test_params_carry_the_caches_the_lengths_and_every_angle_source():
    v = K.parse_kv_append_name("kv_append_fp16_interleaved_any_v4")
    names = [f for _, f in K.kv_append_params(v)]
    assert len(names) == len(set(names))
    assert {"k_cache", "v_cache", "kv_lens", "kv_start", "capacity", "k_cache_ss"} <= set(names)
    assert {"table", "cos", "per_pair", "inv_freq", "exponent_step", "angle_kind"} <= set(names)


def test_the_dispatch_table_names_each_source_and_picks_the_kernel_of_any():
    from cukiln.codegen.rope_variants import SOURCES

    lines = "\n".join(K.dispatch_lines(list(K.enumerate_kv_append()), {}))
    table = {}
    exec(lines, table)
    for source in SOURCES:
        assert table["KV_APPEND"][("bf16", "half", source.value, 8, False)][1] == "kv_append_bf16_half_any_v8"
    assert len(table["KV_APPEND"]) == 32 * len(SOURCES)


def test_only_qk_norm_variants_carry_the_norm_weights():
    plain = K.parse_kv_append_name("kv_append_bf16_half_any_v8")
    normed = K.parse_kv_append_name("kv_append_bf16_half_any_v8_qknorm")
    norm_fields = {"q_norm_weight", "k_norm_weight", "norm_weight_fp32", "norm_eps"}
    assert not norm_fields & {f for _, f in K.kv_append_params(plain)}
    assert norm_fields <= {f for _, f in K.kv_append_params(normed)}
    assert K.params_layout_id(plain) != K.params_layout_id(normed)
