"""Each kernel family's tool hooks, found through the op registry (``OpFamily.tools`` names the module).

A family's tools module provides:
- ``check_variant(entry) -> str | None``: `cukiln verify`'s check of one manifest entry (None: it matches
  the float64 reference);
- ``BENCHES``: bench name (`cukiln bench <name>`) -> Bench;
- ``TUNES``: tuning rule (`cukiln tune <rule>`) -> fn(console) that measures it and writes the tuning store;
and, where it has any (each optional):
- ``report_rules(tuning) -> dict`` and ``print_rules(console, rules)``: its dispatch rules in force and the
  tuning data behind them, for `cukiln report`;
- ``overhead_paths() -> dict``: host-time paths (name -> zero-argument callable, or None: a path not served here,
  left out) for `cukiln bench overhead`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from cukiln.codegen.ops import FAMILIES, family_of_op


@dataclass(frozen=True)
class Bench:
    """One `cukiln bench <name>`: run(console, args) -> result JSON; show(result, console) prints it;
    ``contenders`` and ``label(case)`` draw it (cukiln plot)."""

    run: Callable
    show: Callable
    contenders: tuple[str, ...] = ()
    label: Callable | None = None
    options: tuple[str, ...] = ()  # the bench-only options it accepts (e.g. "no_rotate")


def tools_of(family):
    return importlib.import_module(family.tools)


def tools_of_op(op: str):
    """The tools module of the family owning variant op ``op``; ValueError for an op no family registers."""
    return tools_of(family_of_op(op))


def benches() -> dict[str, Bench]:
    return {name: bench for f in FAMILIES if f.tools for name, bench in tools_of(f).BENCHES.items()}


def tunes() -> dict[str, Callable]:
    return {name: fn for f in FAMILIES if f.tools for name, fn in tools_of(f).TUNES.items()}


def report_rules(family, tuning: dict) -> dict:
    """The family's dispatch rules in force and the tuning behind them ({} for a family with no tuned rule)."""
    rules = getattr(tools_of(family), "report_rules", None)
    return {} if rules is None else rules(tuning)


def print_rules(family, console, rules: dict) -> None:
    show = getattr(tools_of(family), "print_rules", None)
    if show is not None:
        show(console, rules)


def overhead_paths(family) -> dict:
    """The family's host-time paths for `cukiln bench overhead` ({} where it names none)."""
    paths = getattr(tools_of(family), "overhead_paths", None)
    return {} if paths is None else paths()
