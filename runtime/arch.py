"""What the plans need to know of a GPU architecture name ("sm_90"), without asking the GPU."""

from __future__ import annotations

# From sm_90 on, kernels are launched with programmatic stream serialization: each may be scheduled
# while the kernel before it in the stream runs, and waits for it before touching memory (common.cuh).
PROGRAMMATIC_LAUNCH_FROM = 90
# From sm_90 on, blocks can be launched as thread-block clusters sharing their shared memory (split-KV
# decode merges its splits that way).
CLUSTERS_FROM = 90


def arch_number(arch: str | None) -> int:
    """90 for "sm_90"; 0 when unknown."""
    return int(arch[3:]) if arch and arch.startswith("sm_") and arch[3:].isdigit() else 0


def programmatic_launch(arch: str | None) -> bool:
    return arch_number(arch) >= PROGRAMMATIC_LAUNCH_FROM


def clusters(arch: str | None) -> bool:
    return arch_number(arch) >= CLUSTERS_FROM
