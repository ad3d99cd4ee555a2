"""The op registry: every variant belongs to exactly one family, unknown ops are errors, names parse back."""

from __future__ import annotations

import pytest

from cukiln.codegen import ops
from cukiln.codegen.render import render_modules


def test_every_variant_has_one_family_and_every_family_renders_its_own_modules():
    variants = ops.all_variants()
    assert {ops.family_of(v).name for v in variants} == {f.name for f in ops.FAMILIES}
    for name in render_modules(variants):
        owners = {ops.family_of(v).name for v in variants if v.module == name}
        assert len(owners) == 1, name


def test_an_unknown_op_is_an_error_never_an_other_family():
    class Stranger:
        op = "rmsnorm"

    with pytest.raises(ValueError, match="no registered family"):
        ops.family_of(Stranger())
    with pytest.raises(ValueError, match="no registered family"):
        ops.family_of_op("rmsnorm")
    with pytest.raises(ValueError, match="no kernel family"):
        ops.family("rmsnorm")
    with pytest.raises(ValueError, match="not a variant name"):
        ops.parse_name("rmsnorm_bf16_d128")


def test_every_name_parses_back_through_the_registry_and_matches_the_symbol_pattern():
    pattern = ops.symbol_pattern()
    for v in ops.all_variants()[::13]:
        assert ops.parse_name(v.name) == v
        assert pattern.fullmatch(v.name)


def test_tuned_rules_are_unique_across_families():
    rules = [r for f in ops.FAMILIES for r in f.tuned_kernels]
    assert len(rules) == len(set(rules)) and set(rules) == set(ops.tuned_kernels())


def test_tuned_settings_belong_to_tuned_rules():
    for f in ops.FAMILIES:
        assert set(f.tuned_settings) <= set(f.tuned_kernels), f.name
    assert set(ops.tuned_settings()) == set(ops.tuned_kernels())
