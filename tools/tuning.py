"""The tuning store as `cukiln tune` writes it: a rule's measurements, in the file of the GPU they were measured on, stamped
with the fingerprint of the modules it measured: the machine code for its arch of the family's ``tuned_modules``
(codegen/ops.py)."""

from __future__ import annotations

from pathlib import Path

from cukiln.codegen.ops import tuned_modules
from cukiln.core import artifacts
from cukiln.core.archs import tuning_target


def write_tuning(arch: str, rule: str, result: dict, root: Path | None = None) -> Path:
    """Store ``result`` (a measurement on the GPU its "device" names) as rule ``rule`` of that GPU's own tuning file,
    generated/tuning/<arch>-<device>.json (core.archs.tuning_target); ValueError for a rule no family tunes."""
    modules = tuned_modules()
    if rule not in modules:
        raise ValueError(f"no family tunes a rule named {rule!r}; known: {', '.join(sorted(modules))}")
    return artifacts.write_tuning(tuning_target(arch, result["device"]), rule, result, modules[rule], root)
