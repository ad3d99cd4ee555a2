"""The fused decode step's tool hooks (cukiln.tools.hooks): `cukiln verify`'s check of a variant, `cukiln bench
decode-step` and the step's paths in `cukiln bench overhead` (kv_append's among them); no tuning rule."""

from __future__ import annotations

from ..hooks import Bench
from .bench import run, show
from .checks import check_variant
from .overhead import overhead_paths

BENCHES = {"decode-step": Bench(run, show,
                                ("decode_attention alone", "cukiln decode_step", "cukiln separate calls",
                                 "flashinfer three calls", "torch"),
                                lambda case: f"b{case['batch']} L{case['cache_len']}", options=("kv_dtype",))}
TUNES: dict = {}

__all__ = ["BENCHES", "TUNES", "check_variant", "overhead_paths"]
