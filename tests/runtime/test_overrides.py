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


def test_every_write_of_an_override_tells_the_listeners_and_none_removes_one(monkeypatch):
    calls = []
    monkeypatch.setattr(overrides, "_LISTENERS", [])
    overrides.on_change(lambda: calls.append(dict(overrides.CURRENT)))
    before = dict(overrides.CURRENT)
    try:
        overrides.CURRENT.update(decode_pipeline="wide")
        overrides.CURRENT.setdefault("decode_pipeline", "deep")  # present: no write
        assert [c["decode_pipeline"] for c in calls] == ["wide"]
        for remove in (lambda: overrides.CURRENT.pop("decode_pipeline"), lambda: overrides.CURRENT.clear(),
                       lambda: overrides.CURRENT.__delitem__("decode_pipeline"), overrides.CURRENT.popitem):
            with pytest.raises(TypeError, match="never removed"):
                remove()
        assert set(overrides.CURRENT) == set(before)
    finally:
        overrides.CURRENT.update(before)

