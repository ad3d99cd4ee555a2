"""GPU architecture names ("sm_90"): parsing, the archs a build targets, and the features the plans use."""

from __future__ import annotations

import re

# What a plain `cukiln build` compiles for (the local GPU's arch comes on top): the arch every kernel is verified
# and tuned on. The committed manifest describes exactly these. sm_80 and sm_100 would cost a cold build more CPU
# time than sm_90 itself (docs/performance.md, "Build time") for cubins no GPU here runs; a machine with such a GPU
# builds its own arch by default, and a wheel ships them.
DEFAULT_ARCHS = ("sm_90",)
# What a wheel for distribution ships (setup.py; CUKILN_WHEEL_ARCHS overrides it). Every build groups archs that can
# share one PTX over these too, so an arch's cubin is the same whichever of them a build includes: sm_90's always
# comes from the compute_90 PTX that sm_100 assembles from.
RELEASE_ARCHS = ("sm_80", "sm_90", "sm_100")
# The oldest arch the kernels are written for (cp.async, bf16 conversions, 99 KB of shared memory a block).
MIN_ARCH = "sm_80"
# From sm_90 on, kernels are launched with programmatic stream serialization: each may be scheduled
# while the kernel before it in the stream runs, and waits for it before touching memory (common.cuh).
PROGRAMMATIC_LAUNCH_FROM = 90
# From sm_90 on, blocks can be launched as thread-block clusters sharing their shared memory (split-KV
# decode merges its splits that way).
CLUSTERS_FROM = 90
# From sm_90 on, the TMA engine copies tiles described by tensor maps (the warp-specialized decode pipeline).
TENSOR_MAPS_FROM = 90

_ARCH_RE = re.compile(r"^sm_(\d+)([af]?)$")  # sm_90a, sm_100f: arch-specific targets


def arch_number(arch: str | None) -> int:
    """90 for "sm_90" (and for the arch-specific "sm_90a"); 0 for None or anything that is no arch name."""
    m = _ARCH_RE.match(arch or "")
    return int(m[1]) if m else 0


def check_arch(arch: str) -> str:
    """``arch`` itself when cukiln can build for it; ValueError naming the minimum otherwise."""
    if not _ARCH_RE.match(arch):
        raise ValueError(f"expected arch names like sm_90, got {arch!r}")
    if arch_number(arch) < arch_number(MIN_ARCH):
        raise ValueError(f"{arch} is not supported: cukiln's kernels need {MIN_ARCH} or newer "
                         f"(the default build targets {', '.join(DEFAULT_ARCHS)})")
    return arch


def programmatic_launch(arch: str | None) -> bool:
    return arch_number(arch) >= PROGRAMMATIC_LAUNCH_FROM


def clusters(arch: str | None) -> bool:
    return arch_number(arch) >= CLUSTERS_FROM


def tensor_maps(arch: str | None) -> bool:
    return arch_number(arch) >= TENSOR_MAPS_FROM


# Tuned rules (`cukiln tune`) are keyed by what decides them: a GPU's own table under its tuning target, the arch and a
# slug of the device's name ("sm_90-h200" for an "NVIDIA H200", "sm_90-h100-80gb-hbm3" for an H100 SXM), the arch's
# table ("sm_90") serving every GPU of the arch without one of its own.
def tuning_target(arch: str, device_name: str) -> str:
    """The key of the tuned rules measured on a GPU of ``arch`` named ``device_name``."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-").removeprefix("nvidia-")
    return f"{arch}-{slug}" if slug else arch


def target_arch(target: str) -> str:
    """The arch of a tuning target (the target itself when it is an arch)."""
    return target.split("-", 1)[0]


def tuned(rules: dict, target: str | None, default):
    """The rule of ``rules`` (a dispatch table's tuned rules, keyed by tuning target or arch) for ``target``: the GPU's
    own, else its arch's, else ``default``."""
    if target is None:
        return default
    found = rules.get(target)
    return found if found is not None else rules.get(target_arch(target), default)


def tuned_source(rules: dict, target: str | None) -> str | None:
    """Which key of ``rules`` serves ``target`` (tuned's choice), or None for the default."""
    if target is None:
        return None
    return target if target in rules else target_arch(target) if target_arch(target) in rules else None
