"""The op registry: every kernel family cukiln generates, in one list. A new family is one more entry here
(its ``<op>_family`` module declares it); nothing else in codegen, tools or the runtime names a family.
"""

from __future__ import annotations

import re

from . import decode_family, decode_step_family, kv_append_family, rope_family
from .family import OpFamily

FAMILIES: tuple[OpFamily, ...] = (rope_family.FAMILY, decode_family.FAMILY, kv_append_family.FAMILY,
                                   decode_step_family.FAMILY)

_BY_OP = {op: family for family in FAMILIES for op in family.variant_ops}
assert len(_BY_OP) == sum(len(f.variant_ops) for f in FAMILIES), "two families claim one variant op"


def family(name: str) -> OpFamily:
    """The family named ``name``; ValueError naming the known ones otherwise."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise ValueError(f"no kernel family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


def family_of(variant) -> OpFamily:
    """The family that owns ``variant`` (by its ``op``); ValueError for a variant no family registers."""
    found = _BY_OP.get(getattr(variant, "op", None))
    if found is None:
        raise ValueError(f"{variant!r}: its op {getattr(variant, 'op', None)!r} belongs to no registered family")
    return found


def family_of_op(op: str) -> OpFamily:
    """The family whose variants have ``op`` (a manifest entry's "op"); ValueError if none."""
    found = _BY_OP.get(op)
    if found is None:
        raise ValueError(f"variant op {op!r} belongs to no registered family; known: {', '.join(sorted(_BY_OP))}")
    return found


def all_variants() -> list:
    """Every variant of every family, family by family."""
    return [v for f in FAMILIES for v in f.enumerate()]


def parse_name(name: str):
    """The variant of any family whose name is ``name``; ValueError if none."""
    for op, f in sorted(_BY_OP.items(), key=lambda item: -len(item[0])):  # decode_combine_ before decode_
        if name.startswith(op + "_"):
            return f.parse_name(name)
    raise ValueError(f"not a variant name of any family: {name!r}")


def symbol_pattern() -> re.Pattern:
    """A regex that matches any variant name (an entry point's symbol) at the start of a string."""
    return re.compile(rf"(?:{'|'.join(sorted(map(re.escape, _BY_OP), key=len, reverse=True))})_\w+")


def tuned_kernels() -> dict[str, str]:
    """Every tuning rule (`cukiln tune <rule>`) -> regex of the names of the kernels it times."""
    return {rule: pattern for f in FAMILIES for rule, pattern in f.tuned_kernels.items()}


def tuned_settings() -> dict[str, dict[str, object]]:
    """Every tuning rule -> the launch settings its measurements depend on beside its kernels' code (none: {})."""
    return {rule: f.tuned_settings.get(rule, {}) for f in FAMILIES for rule in f.tuned_kernels}
