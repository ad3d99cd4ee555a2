"""The tuning store as `cukiln tune` writes it: a rule's measurements stamped with the fingerprint of the modules
it measured: the machine code for its arch of the family's ``tuned_modules`` (codegen/ops.py)."""

from __future__ import annotations

from pathlib import Path

from cukiln.codegen.ops import tuned_modules
from cukiln.core import artifacts


def write_tuning(arch: str, rule: str, result: dict, root: Path | None = None) -> Path:
    """Store ``result`` as rule ``rule`` of generated/tuning/<arch>.json; ValueError for a rule no family tunes."""
    modules = tuned_modules()
    if rule not in modules:
        raise ValueError(f"no family tunes a rule named {rule!r}; known: {', '.join(sorted(modules))}")
    return artifacts.write_tuning(arch, rule, result, modules[rule], root)
