"""`cukiln tune rope` (GPU): the dense launch choices that rope_plan otherwise takes by default, measured.

The choices (dispatch.ROPE_LAUNCH, applied by rope_plan.launch_rule): the widest vector up to
max_vector_bytes, the stride-free kernel for packed tensors (packed_kernel), the block size range
(min_threads, max_threads) and the passes of a thread over a token's heads (head_passes). One choice is varied at a
time, the others at their default. A candidate is timed on every case where it changes the launch (kernel or block shape); its score is the geometric mean
of its time over the default's on those cases. Cases: `cukiln bench rope`'s shapes and views in bf16,
fp16 and fp32, forward, freqs angles, and in place with rotary_dim = d/4 (CUDA events, median, rotating
buffers). A candidate replaces the default only when it is faster by more than TIE; the choices' winners
together are then timed against the default on every case, and kept only if not slower.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.progress import Progress

from cukiln.core.archs import tuning_target

from ..timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps
from ..tuning import write_tuning
from .bench import SHAPES, VIEWS, make_x

CANDIDATES = {
    "max_vector_bytes": (16, 8, 4),
    "packed_kernel": (True, False),
    "max_threads": (256, 128, 64),
    "min_threads": (64, 32, 128, 256),
    "head_passes": (1, 2),
}
DTYPES = ("bf16", "fp16", "fp32")
# Timing noise between two runs of the same kernel: a candidate must beat the default by more.
TIE = 0.01


def cases() -> list[dict]:
    out = [{"shape_sbhd": list(s), "view": v, "dtype": dt, "rotary_dim": s[3], "inplace": False}
           for dt in DTYPES for s in SHAPES for v in VIEWS]
    s = SHAPES[0]
    return out + [{"shape_sbhd": list(s), "view": "sbhd", "dtype": "bf16", "rotary_dim": s[3] // 4, "inplace": True}]


def configs(default: dict) -> list[dict]:
    """The default, then each choice's other values with the rest at the default."""
    out = [dict(default)]
    for name, values in CANDIDATES.items():
        out += [{**default, name: v} for v in values if v != default[name]]
    return out


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 1.0


def score_choices(default: dict, rows: list[dict]) -> list[dict]:
    """Per choice: each candidate's geometric-mean time over the default's (on the cases it changes),
    the winner (the default unless another is faster by more than TIE) and the margin to the runner-up.

    ``rows``: one per case, {"times": {config label: ms}, "same_as_default": [labels that launch as the
    default does]}.
    """
    out = []
    for name, values in CANDIDATES.items():
        scored = []
        for v in values:
            label = config_label({**default, name: v})
            ratios = [r["times"][label] / r["times"][config_label(default)] for r in rows
                      if label in r["times"] and label not in r["same_as_default"]]
            scored.append({"value": v, "cases": len(ratios), "relative_time": geomean(ratios)})
        # a value that never changed the launch was not measured: it can be neither winner nor runner-up
        ranked = sorted((c for c in scored if c["cases"] or c["value"] == default[name]),
                        key=lambda c: c["relative_time"])
        best = ranked[0]
        winner = best["value"] if best["relative_time"] < 1 - TIE else default[name]
        others = [c for c in ranked if c["value"] != winner]
        win_time = next(c["relative_time"] for c in scored if c["value"] == winner)
        margin = others[0]["relative_time"] / win_time - 1 if others else 0.0
        out.append({"choice": name, "candidates": scored, "winner": winner,
                    "runner_up": others[0]["value"] if others else None, "margin": margin})
    return out


def config_label(config: dict) -> str:
    return ",".join(f"{k}={config[k]}" for k in sorted(config))


def _launch_signature(plan) -> tuple:
    return None if plan is None else (plan.symbol, plan.grid, plan.block)


def _time_case(case: dict, configs_: list[dict]) -> dict:
    """Times one case under each config, planned with that rule (rope_api.plan_call(rule=...)); a config that
    launches as an earlier one reuses its time."""
    import torch

    from cukiln import rope_api

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[case["dtype"]]
    shape, rd, inplace = tuple(case["shape_sbhd"]), case["rotary_dim"], case["inplace"]
    freqs = torch.rand(shape[0], 1, 1, rd, device="cuda") * 100
    x_bytes = math.prod(shape) * torch.finfo(dtype).bits // 8
    sets = rotating_sets(lambda: make_x(shape, case["view"], dtype), 2 * x_bytes)
    sets = [(x, x if inplace else torch.empty_like(x), layout) for x, layout in sets]
    kw = dict(freqs=freqs, layout=sets[0][2], inplace=inplace)
    times, signatures, same = {}, {}, []
    for config in configs_:
        plans = [rope_api.plan_call(x, out=None if inplace else o, rule=config, **kw)[0] for x, o, _ in sets]
        sig, label = _launch_signature(plans[0]), config_label(config)
        earlier = next((lab for lab, s in signatures.items() if s == sig), None)
        if earlier is not None:
            times[label] = times[earlier]
            if earlier == config_label(configs_[0]):
                same.append(label)
        else:
            times[label] = median_ms([lambda p=p: rope_api.launch_plan(p) for p in plans])
        signatures[label] = sig
    moved = 2 * x_bytes * (rd / shape[3] if inplace else 1) + freqs.numel() * 4
    return {**case, "bytes": int(moved), "times": times, "same_as_default": same}


def tune(console: Console) -> dict:
    from cukiln.codegen.rope_abi import LAUNCH_DEFAULT

    default = dict(LAUNCH_DEFAULT)
    result = run_metadata("tune rope", "cukiln tune rope")
    arch = result["arch"]
    copy = copy_tbps()
    all_cases, first = cases(), configs(default)
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("rope: launch choices", total=len(all_cases))
        for case in all_cases:
            rows.append(_time_case(case, first))
            progress.advance(task)
        choices = score_choices(default, rows)
        rule = {c["choice"]: c["winner"] for c in choices}
        combined = None
        if rule != default:
            task = progress.add_task("rope: the winners together", total=len(all_cases))
            pair = [default, rule]
            for row in rows:
                again = _time_case(row, pair)
                row["times"]["rule"] = again["times"][config_label(rule)]
                row["times"]["default, rerun"] = again["times"][config_label(default)]
                progress.advance(task)
            combined = geomean([r["times"]["rule"] / r["times"]["default, rerun"] for r in rows])
            if combined > 1.0:
                rule = default
    label = config_label(default)
    for row in rows:
        row["default_x_copy"] = tbps(row["bytes"], row["times"][label]) / copy
    result.update(copy_tbps=copy, rule=rule, default=default, choices=choices, combined_relative_time=combined,
                  measurements=rows)
    path = write_tuning(arch, "rope", result)
    print_choices(result, console)
    console.print(f"wrote {path} (run `cukiln build --dispatch-only` to fold it into dispatch.py)")
    return result


def print_choices(result: dict, console: Console) -> None:
    from .report import launch_tuning_table

    console.print(launch_tuning_table(result["arch"], result))
    combined = result.get("combined_relative_time")
    if combined is not None:
        console.print(f"the winners together: {combined:.3f} x the default's time (kept only if <= 1)")
    console.print(f"rule for {tuning_target(result['arch'], result['device'])}: {result['rule']}")
