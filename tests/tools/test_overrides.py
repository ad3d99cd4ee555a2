"""Environment overrides used by the tools restore what was there before."""

from __future__ import annotations

import os

import pytest

from cukiln.tools.overrides import env_override

NAME = "CUKILN_TEST_OVERRIDE"


def test_an_unset_variable_is_unset_again(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    with env_override(NAME, "128"):
        assert os.environ[NAME] == "128"
    assert NAME not in os.environ


def test_a_set_variable_gets_its_value_back_even_after_an_error(monkeypatch):
    monkeypatch.setenv(NAME, "auto")
    with pytest.raises(RuntimeError), env_override(NAME, "grid"):
        assert os.environ[NAME] == "grid"
        raise RuntimeError("inside")
    assert os.environ[NAME] == "auto"
