"""Shared test setup: `gpu`-marked tests skip with a reason when no CUDA GPU is visible; the quiet_transformers
fixture."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _gpu_available() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU visible"
    return True, ""


def pytest_runtest_setup(item):
    """A `gpu` test without a GPU skips here, before its fixtures: every such skip has this one location, so
    `pytest -ra` sums them in one line."""
    if "gpu" in item.keywords:
        ok, reason = _gpu_available()
        if not ok:
            pytest.skip(f"gpu tests: {reason}")


@pytest.fixture(scope="module")
def quiet_transformers():
    """transformers' warnings off for a module: configs built on purpose with unusual values (a yarn factor unlike
    max / original, Phi3Config's original length beside rope_parameters) make it log advice meant for authors."""
    import transformers

    previous = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(previous)
