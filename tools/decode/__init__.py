"""Decode attention's tool hooks (cukiln.tools.hooks): its verify check, bench, tuning rule, report section and
overhead paths."""

from __future__ import annotations

from ..hooks import Bench
from . import bench, transformers_bench, transformers_paged_bench, tune
from .checks import check_variant
from .overhead import overhead_paths
from .report import print_rules, report_rules


def _label(case: dict) -> str:
    T = case["T"]
    return f"b{case['batch']} T{T // 1024}k" if T >= 1024 else f"b{case['batch']} T{T}"


BENCHES = {"decode": Bench(bench.run, bench.show, ("cukiln", "torch_sdpa"), _label, options=("no_rotate", "kv_dtype", "paged", "q_len")),
           # decode attention inside transformers' generation (cukiln.integrations.transformers); a table, no plot
           "transformers": Bench(transformers_bench.run, transformers_bench.show),
           # transformers' continuous batching (generate_batch) through cukiln's paged decode; a table, no plot
           "transformers-paged": Bench(transformers_paged_bench.run, transformers_paged_bench.show)}
TUNES = {"decode": tune.tune, "decode-fp8": tune.tune_fp8, "decode-paged": tune.tune_paged}

__all__ = ["BENCHES", "TUNES", "check_variant", "overhead_paths", "print_rules", "report_rules"]
