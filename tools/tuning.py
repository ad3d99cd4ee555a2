"""The tuning store as `cukiln tune` writes it: a rule's measurements, in the file of the GPU they were measured on, stamped
with the fingerprint of the kernels it timed: the machine code for its arch of the family's ``tuned_kernels``
(codegen/ops.py)."""

from __future__ import annotations

from pathlib import Path

from cukiln.codegen.ops import tuned_kernels, tuned_settings
from cukiln.core import artifacts
from cukiln.core.archs import tuning_target


def write_tuning(arch: str, rule: str, result: dict, root: Path | None = None) -> Path:
    """Store ``result`` (a measurement on the GPU its "device" names) as rule ``rule`` of that GPU's own tuning file,
    generated/tuning/<arch>-<device>.json (core.archs.tuning_target); ValueError for a rule no family tunes."""
    kernels = tuned_kernels()
    if rule not in kernels:
        raise ValueError(f"no family tunes a rule named {rule!r}; known: {', '.join(sorted(kernels))}")
    return artifacts.write_tuning(tuning_target(arch, result["device"]), rule, result, kernels[rule], root,
                                  tuned_settings()[rule])
