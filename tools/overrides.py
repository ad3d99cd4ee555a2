"""Dispatch overrides for measurements and checks: an environment variable set for a block of calls."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def env_override(name: str, value: str):
    """``name`` is ``value`` inside the block and as it was (set or not) after it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before
