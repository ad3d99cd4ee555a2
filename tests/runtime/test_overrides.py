"""Dispatch overrides restore what was there before, even after an error, and refuse names they do not know."""

from __future__ import annotations

import pytest

from cukiln import overrides


def test_a_forced_value_holds_inside_the_block_only():
    before = overrides.CURRENT["decode_pipeline"]
    with overrides.forced("decode_pipeline", "wide"):
        assert overrides.CURRENT["decode_pipeline"] == "wide"
    assert overrides.CURRENT["decode_pipeline"] == before


def test_the_previous_value_comes_back_after_an_error():
    before = overrides.CURRENT["rope_thd_dispatch"]
    with pytest.raises(RuntimeError), overrides.forced("rope_thd_dispatch", "grid"):
        raise RuntimeError("inside")
    assert overrides.CURRENT["rope_thd_dispatch"] == before


def test_an_unknown_override_is_refused():
    with pytest.raises(ValueError, match="no override named"):
        with overrides.forced("rope_vector_width", "8"):
            pass
