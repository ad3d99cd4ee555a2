"""`cukiln tune decode` (GPU): over a grid of (rows x KV heads, cache length), a ladder of split counts
(SPLIT_LADDER, as the runtime launches them: clusters or the combine kernel) with each K/V pipeline
(decode_variants.Pipeline) is timed, a pipeline's split counts in turn, round by round; each point's best goes into the
rule's table (runtime/decode_plan.split_from_table), written to this GPU's generated/tuning/<arch>-<gpu>.json; the next `cukiln build`
folds the table into dispatch.py. `cukiln tune decode-fp8` does the same over FP8 (e4m3) caches of the same values, and
`cukiln tune decode-paged` over NHD pools of pages of TUNED_PAGE keys in shuffled order, each with the pipelines that
have such kernels: the tables FP8 caches and paged pools take (DECODE_SPLIT_FP8, DECODE_SPLIT_PAGED).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress

from cukiln.codegen.axes import MAX_VECTOR_BYTES
from cukiln.codegen.decode_variants import PIPELINES, Cache, Form, Pipeline

from ..timing import copy_tbps, medians_ms, rotating_sets, run_metadata, tbps
from ..tuning import write_tuning
from .bench import FP8_SCALE, HEAD_DIM, HEADS_KV, HEADS_Q, fp8_inputs, inputs, kv_bytes, moved_bytes
from .checks import forced_decode_pipeline, paged_copy

NARROW = Pipeline.NARROW.value
TUNE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
TUNE_LENGTHS = (512, 2048, 8192, 32768)
# Beyond the grid where caches stay small enough to measure: long contexts of one row (the bench's
# b = 1, T = 128k), whose best split count the nearest grid point (T = 32k) does not predict.
TUNE_EXTRA_POINTS = ((1, 131072),)
SPLIT_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
MAX_TUNED_BLOCKS = 4096  # blocks x splits measured at most (several waves of any grid)


def split_ladder(blocks: int, keys: int, tile: int = Pipeline.NARROW.tile_keys) -> list[int]:
    """The split counts tuned at a point: SPLIT_LADDER's counts that differ in effect (the kernel shares keys
    out in whole tiles of ``tile`` keys), keep a tile of keys a split and MAX_TUNED_BLOCKS blocks in all."""
    from cukiln.decode_plan import effective_splits

    counts = {effective_splits(keys, s, tile) for s in SPLIT_LADDER
              if s == 1 or (keys // s >= tile and blocks * s <= MAX_TUNED_BLOCKS)}
    return sorted(counts)


def measured_times(measurement: dict) -> dict[str, dict[int, float]]:
    """pipeline -> split count -> ms of a tuned point (files from before the pipelines: narrow only)."""
    by_pipeline = measurement.get("ms_by_pipeline") or {NARROW: measurement["ms_by_splits"]}
    return {p: {int(s): ms for s, ms in times.items()} for p, times in by_pipeline.items()}


def rule_choice(measurement: dict, sms: int, rule: dict) -> tuple[int, str]:
    """The (split count, pipeline) ``rule`` picks for a tuned point (whose blocks, T and resident blocks it
    records), for a call that has every pipeline."""
    from cukiln.decode_plan import choose_pipeline

    return choose_pipeline(measurement["blocks"], measurement["T"], sms, rule, measurement.get("resident"))


def measured_choice(measurement: dict, sms: int, rule: dict) -> tuple[int, str]:
    """rule_choice, snapped to the nearest split count measured with that pipeline (or the narrow one, when
    the point has no times for it)."""
    splits, pipeline = rule_choice(measurement, sms, rule)
    times = measured_times(measurement)
    pipeline = pipeline if pipeline in times else NARROW
    return min(times[pipeline], key=lambda s: (abs(s - splits), s)), pipeline


# Times within this fraction of a point's fastest tie with it (timing noise): the least split count wins,
# and a pipeline later in PREFERENCE only where it beats every earlier one by more. The same build timed A B B A by
# `cukiln bench decode` agreed with itself within 0.1 % at the median case and 0.5 % at most
# (results/decode-ab-h100-2026-11-25-padding-rows-*); a tie of 1 % gave away up to 1 % (at b = 1, T = 128k: 12
# splits kept for 16, 0.55 % slower in the tune); a count within 0.3 % of the fastest is as good as it within the
# tune's noise.
TIE = 0.003


def _least_within_tie(times: dict[int, float]) -> int:
    fastest = min(times.values())
    return min(s for s, ms in times.items() if ms <= fastest * (1 + TIE))


# The order in which a point's pipelines are preferred where their times tie: narrow first (every variant has it),
# then ws (the fused decode step's ring, two blocks a multiprocessor), the other rings of the CUDA-core copies, and
# ws_deep (the ws ring made deeper for grids of one block a multiprocessor) last.
PREFERENCE = (Pipeline.NARROW, Pipeline.WS, Pipeline.DEEP, Pipeline.WIDE, Pipeline.WS_DEEP)
assert sorted(PREFERENCE) == sorted(PIPELINES), "every pipeline has its place in PREFERENCE"


def fit_table(measurements: list[dict]) -> dict:
    """The tuned rule: per point (blocks, T, the best pipeline's index in PIPELINES, each pipeline's split
    count), each count the least within TIE of that pipeline's fastest (fewer splits: less merging, and the
    choice does not chase noise); the best pipeline the first in PREFERENCE within TIE of the fastest, so that a
    later one is taken only where it beats every earlier one beyond TIE. A pipeline without times takes the
    narrow one's count."""
    names = [p.value for p in PIPELINES]
    table = []
    for m in measurements:
        times = measured_times(m)
        fastest = {p: min(t.values()) for p, t in times.items()}
        best = next(p.value for p in PREFERENCE
                    if p.value in fastest and fastest[p.value] <= min(fastest.values()) * (1 + TIE))
        counts = [_least_within_tie(times.get(p, times[NARROW])) for p in names]
        table.append([m["blocks"], m["T"], names.index(best), *counts])
    return {"table": sorted(table), "tie": TIE}


TUNED_PAGE = 16  # `cukiln tune decode-paged`: vLLM's default page size, whose choices serve every page size


def tune(console: Console) -> dict:
    return _tune(console, "decode")


def tune_fp8(console: Console) -> dict:
    return _tune(console, "decode-fp8")


def tune_paged(console: Console) -> dict:
    return _tune(console, "decode-paged")


def _tune(console: Console, name: str) -> dict:
    import torch

    import cukiln

    from cukiln.decode_api import plan_call
    from cukiln.generated import dispatch
    from cukiln.loader import KERNELS

    from cukiln.core.archs import tensor_maps

    props = torch.cuda.get_device_properties(0)
    sms, arch = props.multi_processor_count, f"sm_{props.major}{props.minor}"
    # the pipelines this GPU runs (ws, ws_deep: sm_90 on) that the caches have kernels of; the table gives the others
    # the narrow pipeline's count
    fp8, paged = name == "decode-fp8", name == "decode-paged"
    cache, form = (Cache.E4M3 if fp8 else Cache.SAME), (Form.PAGED if paged else Form.FIXED)
    itemsize = cache.itemsize(2)  # beside bf16 q
    pipelines = [p for p in PIPELINES if (not p.warp_specialized or tensor_maps(arch)) and (
        "bf16", HEAD_DIM, 3, MAX_VECTOR_BYTES // itemsize, p.value, cache.value, form.value) in dispatch.DECODE]
    options = {"k_scale": FP8_SCALE, "v_scale": FP8_SCALE} if fp8 else {}

    def make(b: int, T: int) -> tuple:
        """(q, k, v, call options) of one input set."""
        if fp8:
            return (*fp8_inputs(b, T)[:3], options)
        q, k, v = inputs(b, T)
        if not paged:
            return q, k, v, options
        (k, v), table = paged_copy((k, v), TUNED_PAGE, pool_layout="bshd", spare=0)
        return q, k, v, {"kv_layout": "bshd", "block_table": table}
    copy = copy_tbps()
    probe = plan_call(*inputs(1, 1024), 1024, num_splits=2).attention
    resident = KERNELS.resident_blocks(0, probe.module, probe.symbol, 32 * dispatch.DECODE_WARPS, probe.shared)
    points = [(b, T) for b in TUNE_BATCHES for T in TUNE_LENGTHS] + list(TUNE_EXTRA_POINTS)
    measurements = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("decode split counts", total=len(points))
        for b, T in points:
            sets = rotating_sets(lambda: make(b, T), kv_bytes(b, T, itemsize))
            outs = [torch.empty(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in sets]
            point = {"batch": b, "T": T, "blocks": b * HEADS_KV, "resident": resident}
            # a pipeline's split counts timed in turn, round by round (medians_ms); the pipelines one after another,
            # since changing the forced pipeline empties the plan caches (each call would plan afresh)
            times = {}
            for pipeline in pipelines:
                with forced_decode_pipeline(pipeline.value):
                    times[pipeline.value] = medians_ms(
                        {s: [lambda st=st, o=o, s=s: cukiln.decode_attention(*st[:3], T, out=o, num_splits=s, **st[3])
                             for st, o in zip(sets, outs)]
                         for s in split_ladder(b * HEADS_KV, T, pipeline.tile_keys)}, batches=9)
            best_pipeline, best = min(((p, s) for p in times for s in times[p]), key=lambda ps: times[ps[0]][ps[1]])
            rate = tbps(moved_bytes(b, T, itemsize), times[best_pipeline][best])
            measurements.append({**point, "ms_by_pipeline": times, "best_pipeline": best_pipeline, "best_splits": best,
                                 "bytes": moved_bytes(b, T, itemsize), "best_tbps": rate, "best_x_copy": rate / copy})
            del sets, outs
            progress.advance(task)
    rule = fit_table(measurements)
    meta = run_metadata(f"{name}-tune", f"cukiln tune {name}")
    result = {"device": meta["device"], "date": meta["date"], "sms": sms, "command": meta["command"],
              "versions": meta["versions"], "copy_tbps": copy,
              "shape": {"heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "dtype": "bf16",
                        "cache": cache.value if fp8 else "bf16", **({"page_size": TUNED_PAGE} if paged else {})},
              "rule": rule, "measurements": measurements}
    path = write_tuning(meta["arch"], name, result)
    console.print(f"{name} split table for {path.stem}: per K/V pipeline ({', '.join(p.value for p in pipelines)}), "
                  f"the least of "
                  f"{len(SPLIT_LADDER)} split counts within {TIE:.1%} of the fastest, at "
                  f"{len(measurements)} (rows x KV heads, T) points ({resident} blocks resident per SM); "
                  f"wrote {path} — run `cukiln build` to fold it into dispatch.py")
    return result
