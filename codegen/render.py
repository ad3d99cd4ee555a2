"""Rendering: variants -> CUDA source text, one translation unit per module (see each variant's ``module``),
and the headers the modules include. Each family renders its own (ops.FAMILIES)."""

from __future__ import annotations

from . import jinja
from .ops import FAMILIES, family_of

COMMON_HEADER = "common.cuh"
FP8_HEADER = "fp8.cuh"  # FP8 caches' scales, widening and quantizing: decode's and the cache append's


def render_headers(knobs: dict[str, dict] | None = None) -> dict[str, str]:
    """Every header the modules include: name -> source (written to generated/, handed to NVRTC).

    ``knobs``: family name -> keyword arguments of its render_headers, for experiments
    (benchmarks/rope_sweep.py, benchmarks/decode_sweep.py); the build uses the defaults.
    """
    knobs = knobs or {}
    unknown = set(knobs) - {f.name for f in FAMILIES}
    if unknown:
        raise ValueError(f"render_headers: no family {sorted(unknown)}")
    headers = {COMMON_HEADER: jinja.render("common.cuh.j2"), FP8_HEADER: jinja.render("fp8.cuh.j2")}
    for f in FAMILIES:
        headers.update(f.render_headers(**knobs.get(f.name, {})))
    return headers


def render_modules(variants: list) -> dict[str, str]:
    """module name -> source, for every module that ``variants`` touch, in a stable order."""
    by_module: dict[str, list] = {}
    for v in variants:
        by_module.setdefault(v.module, []).append(v)
    sources = {}
    for name, group in sorted(by_module.items()):
        family = family_of(group[0])
        assert all(family.owns(v) for v in group), f"module {name} mixes families"
        sources[name] = family.render_module(group[0].dtype, group)
    return sources
