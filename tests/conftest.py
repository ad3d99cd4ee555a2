"""Shared test setup: `gpu`-marked tests skip with a reason when no CUDA GPU is visible; the quiet_transformers
fixture."""

from __future__ import annotations

import pytest


def _gpu_available() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU visible"
    return True, ""


def pytest_collection_modifyitems(config, items):
    ok, reason = _gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def quiet_transformers():
    """transformers' warnings off for a module: configs built on purpose with unusual values (a yarn factor unlike
    max / original, Phi3Config's original length beside rope_parameters) make it log advice meant for authors."""
    import transformers

    previous = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(previous)
