"""RoPE's tool hooks (cukiln.tools.hooks): its verify check, benches, tuning rules, report section and
overhead paths."""

from __future__ import annotations

from ..hooks import Bench
from . import bench, qk_bench, thd, tune
from .checks import check_rope_variant, with_each_source
from .overhead import overhead_paths
from .report import print_rules, report_rules


def check_variant(entry: dict) -> str | None:
    """The variant checked with each angle source it serves (several where it takes its source at run time)."""
    from cukiln.generated import dispatch

    for _, source in with_each_source(dispatch.ROPE, entry, [None]):
        problem = check_rope_variant({**entry["axes"], "angles": source}, entry["name"])
        if problem is not None:
            return f"angles {source}: {problem}"
    return None


def _rope_label(case: dict) -> str:
    s, b, h, d = case["shape_sbhd"]
    return f"{s}x{b}x{h}x{d} {case['view']} {case['dtype']} {case['direction']}"


BENCHES = {
    "rope": Bench(bench.run, bench.show, ("cukiln", "torch", "torch.compile"), _rope_label),
    "rope-thd": Bench(thd.run, thd.show, ("auto", "token", "grid", "grid, no max_seqlen"),
                      lambda case: f"{case['lengths']['n_seqs']} seqs"),
    "rope-qk": Bench(qk_bench.run, qk_bench.show, ("cukiln in place", "cukiln", "flashinfer in place", "flashinfer",
                                                   "torch.compile", "liger"), qk_bench.label),
}
TUNES = {"rope": tune.tune, "rope-thd": thd.tune}

__all__ = ["BENCHES", "TUNES", "check_variant", "overhead_paths", "print_rules", "report_rules"]
