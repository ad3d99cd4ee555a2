"""Dispatch overrides, for checks and measurements: force a choice that the dispatch rules would otherwise make.

Each starts from an environment variable, read once when cukiln's runtime is imported (``CUKILN_DECODE_PIPELINE
=narrow|deep|wide|ws|ws_deep|auto``, ``CUKILN_ROPE_THD_DISPATCH=token|grid|auto``,
``CUKILN_DECODE_STEP_LAUNCH=fused|separate|auto``: the decode step's one fused launch, or its append and attention
launched apart; ``CUKILN_TRACED_OPS=generic|auto``: whether torch.compile'd cukiln.torch calls take the ops
themselves or ops specialized to their constants, runtime/specialize.py), and is set for a block of calls with
``forced(name, value)``. The ops read the current value from ``CURRENT`` (one dict lookup a call) and the
planner validates it (``traced_ops`` is read and validated while torch.compile traces a call, and a compiled graph
keeps the choice); "auto" leaves the choice to the dispatch rules.
"""

from __future__ import annotations

import contextlib
import os

ENVIRONMENT = {"decode_pipeline": "CUKILN_DECODE_PIPELINE", "rope_thd_dispatch": "CUKILN_ROPE_THD_DISPATCH",
               "decode_step_launch": "CUKILN_DECODE_STEP_LAUNCH", "traced_ops": "CUKILN_TRACED_OPS"}
_LISTENERS: list = []  # called after every change: caches of plans made under the old value (runtime/native.py)


class _Overrides(dict):
    """The current values, a dict whose every write tells the listeners: a plan made under the old value must not
    serve the new one, however the value was written (``forced``, or a test's ``monkeypatch.setitem``, which once
    left the native plans of another pipeline serving the calls it forced). ``update`` and ``setdefault`` write
    item by item; an override is never removed. A read is a dict subclass's lookup (a little slower than an exact
    dict's), on the Python paths only: the native hot path reads no override."""

    def __setitem__(self, name: str, value: str) -> None:
        super().__setitem__(name, value)
        for listener in _LISTENERS:
            listener()

    def update(self, *others, **values) -> None:
        for name, value in dict(*others, **values).items():
            self[name] = value

    def setdefault(self, name: str, value: str | None = None) -> str:
        if name not in self:
            self[name] = value
        return self[name]

    def _removes(self, *args, **kwargs):
        raise TypeError("an override is never removed: write \"auto\" to leave the choice to the dispatch rules")

    __delitem__ = pop = popitem = clear = _removes


CURRENT = _Overrides({name: os.environ.get(variable, "auto") for name, variable in ENVIRONMENT.items()})


def on_change(listener) -> None:
    """Call ``listener()`` whenever an override is written (``forced``: on entering and on leaving its block)."""
    _LISTENERS.append(listener)


@contextlib.contextmanager
def forced(name: str, value: str):
    """Calls inside the block take ``value`` for override ``name``; the previous value is restored after it."""
    if name not in CURRENT:
        raise ValueError(f"no override named {name!r}; known: {', '.join(CURRENT)}")
    before = CURRENT[name]
    CURRENT[name] = value
    try:
        yield
    finally:
        CURRENT[name] = before
