"""Where a public call's plan-cache hit spends its host time (GPU): the native hot path built with stage timers
(CUKILN_NATIVE_TIMERS=1, set here before cukiln loads; runtime/native.py's STAGES), on the bench's tiny calls:
decode_attention and the decode step (b = 1, T = 64, GQA 32/8, d 128, bf16), allocating and with ``out=``, and
kv_append in place. Each call's wall time per call beside the sum of its stages; the rest is Python above the
native caller. The calls take turns over ROUNDS rounds; medians of the rounds' means.

    python benchmarks/studies/hot_path_stages.py OUT_DIR

Writes OUT_DIR/hot-path-stages.json.
"""

from __future__ import annotations

import os

os.environ["CUKILN_NATIVE_TIMERS"] = "1"  # before cukiln loads its native module

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import cukiln  # noqa: E402
import cukiln.torch  # noqa: E402,F401  (the ops and their native callers)
from cukiln import native  # noqa: E402
from cukiln.tools import decode_step_bench  # noqa: E402

CALLS, ROUNDS = 10_000, 7


def cases() -> dict:
    """label -> (the call, the native op or variant whose stages it times)."""
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    q, k, v, kc, vc, lens, table = (s[n] for n in ("q", "k", "v", "k_cache", "v_cache", "lens", "cos_sin"))
    dk = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    dv, out = torch.randn_like(dk), torch.empty_like(q)
    return {
        "cukiln.decode_attention (allocates out)": (lambda: cukiln.decode_attention(q, dk, dv, 64),
                                                    "decode_attention" + native.NO_LSE),
        "cukiln.decode_attention (out=)": (lambda: cukiln.decode_attention(q, dk, dv, 64, out=out),
                                           "decode_attention#out" + native.NO_LSE),
        "cukiln.decode_step (allocates out)": (lambda: cukiln.decode_step(q, k, v, kc, vc, lens, cos_sin_cache=table),
                                               "decode_step" + native.NO_LSE),
        "cukiln.decode_step (out=)": (lambda: cukiln.decode_step(q, k, v, kc, vc, lens, cos_sin_cache=table, out=out),
                                      "decode_step#out" + native.NO_LSE),
        "cukiln.kv_append (in place)": (lambda: cukiln.kv_append(q, k, v, kc, vc, lens, cos_sin_cache=table,
                                                                 inplace=True), "kv_append#inplace"),
    }


def main(out_dir: str) -> None:
    module = native.module()
    assert module is not None and module.stage_timers, f"no timers build: {native.off_reason()}"
    found = cases()
    for fn, name in found.values():  # warm: every call a hit from here on
        for _ in range(200):
            fn()
        module.take_stage_times(name)
    wall = {label: [] for label in found}
    stages = {label: [] for label in found}
    for _ in range(ROUNDS):
        for label, (fn, name) in found.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(CALLS):
                fn()
            torch.cuda.synchronize()
            wall[label].append((time.perf_counter() - start) / CALLS * 1e6)
            totals, hits = module.take_stage_times(name)
            assert hits == CALLS, (label, hits)
            stages[label].append([ns / hits / 1e3 for ns in totals])
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": CALLS, "rounds": ROUNDS,
              "stages": list(native.STAGES), "cases": {}}
    print(f"µs per call, medians of {ROUNDS} rounds: " + ", ".join(native.STAGES))
    for label in found:
        per_stage = [statistics.median(r[i] for r in stages[label]) for i in range(len(native.STAGES))]
        result["cases"][label] = {"wall_us": statistics.median(wall[label]), "stages_us": per_stage,
                                  "rounds_wall_us": wall[label], "rounds_stages_us": stages[label]}
        print(f"{statistics.median(wall[label]):7.2f} wall, {sum(per_stage):6.2f} in C++: "
              + " ".join(f"{x:5.2f}" for x in per_stage) + f"  {label}")
    with open(f"{out_dir}/hot-path-stages.json", "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
