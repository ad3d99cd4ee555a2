"""kv_append's tool hooks (cukiln.tools.hooks): `cukiln verify`'s check of a variant. Its bench and host-time paths
are the decode step's (cukiln.tools.decode_step), whose first launch it is; no tuning rule."""

from __future__ import annotations

from .checks import check_variant

BENCHES: dict = {}
TUNES: dict = {}

__all__ = ["BENCHES", "TUNES", "check_variant"]
