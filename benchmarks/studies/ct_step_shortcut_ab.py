"""cukiln.torch.decode_step's eager call, in one process (GPU): the wrapper as it is (straight into the native
caller, which converts the scalars itself) beside its previous form (the op's 28 arguments built and converted
first, then sliced for the native caller), with cukiln.decode_step allocating and torch's ``add_`` as references.
The paths take turns over ROUNDS rounds of CALLS calls each.

    python benchmarks/studies/ct_step_shortcut_ab.py OUT_DIR

Writes OUT_DIR/ct-step-shortcut-ab.json and prints each path's median and best round, and their ratio to ``add_``.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

import cukiln
import cukiln.torch as ct
from cukiln import kv_append_torch
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import per_call_us

CALLS, ROUNDS = 5000, 9


def before(q, k_new, v_new, k_cache, v_cache, kv_lens, *, kv_layout="bhsd", kv_start=None, positions=None,
           freqs=None, cos=None, sin=None, cos_sin_cache=None, inv_freq=None, base=None, rope_scale=1.0, mscale=1.0,
           interleaved=False, rotary_dim=None, rotary_offset=0, q_norm_weight=None, k_norm_weight=None,
           norm_eps=1e-6, scale=None, softcap=None, num_splits=None, advance_lens=False, return_lse=False):
    """The wrapper's eager path before the change, step for step."""
    if not isinstance(kv_lens, torch.Tensor):
        raise TypeError("kv_lens")
    args = (q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, *kv_append_torch._split(kv_start), positions,
            freqs, cos, sin, cos_sin_cache, inv_freq, None if base is None else float(base), float(rope_scale),
            float(mscale), bool(interleaved), rotary_dim, rotary_offset, q_norm_weight, k_norm_weight,
            float(norm_eps), None if scale is None else float(scale), None if softcap is None else float(softcap),
            num_splits, bool(advance_lens))
    if (kv_append_torch._NATIVE_STEP is not None and not advance_lens and q.is_cuda and kv_lens.is_cuda
            and kv_append_torch.eager(q) and kv_append_torch.untracked(q, k_new, v_new)):
        return kv_append_torch._NATIVE_STEP(*args[:7], kv_start, *args[9:-1], None, return_lse)
    raise AssertionError("the study's calls take the native path")


def main(out_dir: str) -> None:
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    q, k, v, kc, vc, lens, table = (s[n] for n in ("q", "k", "v", "k_cache", "v_cache", "lens", "cos_sin"))
    y = torch.randn(64, device="cuda")
    paths = {"torch add_": lambda: y.add_(1.0),
             "cukiln.decode_step (allocates out)": lambda: cukiln.decode_step(q, k, v, kc, vc, lens,
                                                                              cos_sin_cache=table),
             "cukiln.torch.decode_step eager, arguments built first (before)": lambda: before(
                 q, k, v, kc, vc, lens, cos_sin_cache=table),
             "cukiln.torch.decode_step eager, straight to the caller (after)": lambda: ct.decode_step(
                 q, k, v, kc, vc, lens, cos_sin_cache=table)}
    assert torch.equal(paths["cukiln.torch.decode_step eager, arguments built first (before)"](),
                       paths["cukiln.torch.decode_step eager, straight to the caller (after)"]())
    figures = {label: [] for label in paths}
    for fn in paths.values():
        for _ in range(100):
            fn()
    for _ in range(ROUNDS):
        for label, fn in paths.items():
            figures[label].append(per_call_us(fn, CALLS))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cukiln": cukiln.__version__,
              "calls": CALLS, "rounds": ROUNDS,
              "paths": {label: {"us_per_call": statistics.median(f), "rounds_us": f} for label, f in figures.items()}}
    with open(f"{out_dir}/ct-step-shortcut-ab.json", "w") as f:
        json.dump(result, f, indent=1)
    add, add_best = result["paths"]["torch add_"]["us_per_call"], min(figures["torch add_"])
    for label, f in figures.items():
        m = statistics.median(f)
        print(f"{m:8.2f} {min(f):8.2f}  {m / add:5.2f} ({min(f) / add_best:4.2f})  {label}")


if __name__ == "__main__":
    main(sys.argv[1])
