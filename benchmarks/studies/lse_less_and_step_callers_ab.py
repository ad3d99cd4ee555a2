"""Two host-time changes against their previous forms, in one process (GPU):

- a compiled attention call that does not ask for lse takes an op specialized to return its output alone (the
  variant that allocates no lse); before, its op returned (out, lse) and the graph dropped lse. The previous form
  is the same compiled function asking for lse and returning out alone: the graph it gives is the one from before;
- ``cukiln.decode_step`` and ``cukiln.torch.decode_step`` call the native step's builtin callers straight; before, a
  Python function between them rebuilt the op's arguments. The previous form is rebuilt here as it was.

Each pair takes turns with torch's ``add_`` (eager) or compiled ``add_`` / ``t + 1`` over ROUNDS rounds of CALLS
calls; the table gives each path's median, its best round and its median paired ratio or difference with the
reference timed just before it in the same round.

    python benchmarks/studies/lse_less_and_step_callers_ab.py OUT_DIR

Writes OUT_DIR/lse-less-and-step-callers-ab.json.
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

CALLS, ROUNDS = 3000, 11


def _step_through_a_frame(q, k_new, v_new, k_cache, v_cache, kv_lens, *, cos_sin_cache, out=None, return_lse=False):
    """The previous form of the step's native path (only the arguments this study passes): one Python function
    between the public call and the builtin caller, rebuilding the op's 28 arguments."""
    callers = kv_append_torch._NATIVE_STEP

    def step(q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, kv_start, positions, freqs, cos, sin,
             cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset, q_norm_weight,
             k_norm_weight, norm_eps, scale, softcap, num_splits, out, return_lse):
        start_tensor, start = kv_append_torch._split(kv_start)
        args = (q, k_new, v_new, k_cache, v_cache, kv_lens, kv_layout, start_tensor, start, positions, freqs, cos,
                sin, cos_sin_cache, inv_freq, base, rope_scale, mscale, interleaved, rotary_dim, rotary_offset,
                q_norm_weight, k_norm_weight, norm_eps, scale, softcap, num_splits, False)
        if out is None:
            return callers[False, True](*args) if return_lse else callers[False, False](*args)[0]
        return callers[True, True](*args, out) if return_lse else callers[True, False](*args, out)[0]

    return step(q, k_new, v_new, k_cache, v_cache, kv_lens, "bhsd", None, None, None, None, None, cos_sin_cache,
                None, None, 1.0, 1.0, False, None, 0, None, None, 1e-6, None, None, None, out, return_lse)


def _public_step_before(q, k_new, v_new, k_cache, v_cache, kv_lens, *, cos_sin_cache):
    """cukiln.decode_step's checks as they stand, then the previous form's frame."""
    if q.requires_grad or getattr(k_new, "requires_grad", False) or getattr(v_new, "requires_grad", False):
        raise AssertionError("the study's calls need no gradient")
    if type(kv_lens) is torch.Tensor and kv_lens.is_cuda and q.is_cuda:
        return _step_through_a_frame(q, k_new, v_new, k_cache, v_cache, kv_lens, cos_sin_cache=cos_sin_cache)
    raise AssertionError("the study's calls take the native path")


def _ct_step_before(q, k_new, v_new, k_cache, v_cache, kv_lens, *, cos_sin_cache):
    """cukiln.torch.decode_step's checks as they stand, then the previous form's frame."""
    if not isinstance(kv_lens, torch.Tensor):
        raise TypeError("kv_lens")
    if (q.is_cuda and kv_lens.is_cuda and kv_append_torch.eager(q)
            and kv_append_torch.untracked(q, k_new, v_new)):
        return _step_through_a_frame(q, k_new, v_new, k_cache, v_cache, kv_lens, cos_sin_cache=cos_sin_cache)
    raise AssertionError("the study's calls take the native path")


def main(out_dir: str) -> None:
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    step = tuple(s[name] for name in ("q", "k", "v", "k_cache", "v_cache", "lens"))
    table = s["cos_sin"]
    y = torch.randn(64, device="cuda")
    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)

    def compiled(fn, *args):
        c = torch.compile(fn, fullgraph=True)
        return lambda: c(*args)

    references = {"add_": lambda: y.add_(1.0),
                  "compiled add_": compiled(lambda t: t.add_(1.0), y),
                  "compiled t + 1": compiled(lambda t: t + 1.0, y)}
    # (reference, before, after) per question
    pairs = {
        "cukiln.decode_step (allocates out)": ("add_", lambda: _public_step_before(*step, cos_sin_cache=table),
                                               lambda: cukiln.decode_step(*step, cos_sin_cache=table)),
        "cukiln.torch.decode_step (eager)": ("add_", lambda: _ct_step_before(*step, cos_sin_cache=table),
                                             lambda: ct.decode_step(*step, cos_sin_cache=table)),
        "compiled cukiln.torch.decode_attention": (
            "compiled t + 1", compiled(lambda t: ct.decode_attention(t, k, v, 64, return_lse=True)[0], q),
            compiled(lambda t: ct.decode_attention(t, k, v, 64), q)),
        "compiled cukiln.torch.decode_step": (
            "compiled add_", compiled(lambda *t: ct.decode_step(*t, cos_sin_cache=table, return_lse=True)[0], *step),
            compiled(lambda *t: ct.decode_step(*t, cos_sin_cache=table), *step)),
    }
    for label, (_, before, after) in pairs.items():  # warm, and the two forms agree
        for _ in range(50):
            want, got = before(), after()
        assert torch.equal(want, got), label
    for fn in references.values():
        for _ in range(50):
            fn()
    figures = {name: [] for name in references}
    paired = {}
    for label in pairs:
        for side in ("before", "after"):
            figures[f"{label}: {side}"] = []
            paired[f"{label}: {side}"] = []
    for _ in range(ROUNDS):
        for label, (reference, before, after) in pairs.items():
            for side, fn in (("before", before), ("after", after)):
                ref = per_call_us(references[reference], CALLS)
                got = per_call_us(fn, CALLS)
                figures[reference].append(ref)
                figures[f"{label}: {side}"].append(got)
                paired[f"{label}: {side}"].append(got / ref if reference == "add_" else got - ref)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cukiln": cukiln.__version__,
              "calls": CALLS, "rounds": ROUNDS,
              "paths": {name: {"us_per_call": statistics.median(f), "best_us": min(f), "rounds_us": f}
                        for name, f in figures.items()},
              "paired": {name: {"reference": pairs[name.rsplit(": ", 1)[0]][0], "median": statistics.median(p),
                                "rounds": p} for name, p in paired.items()}}
    with open(f"{out_dir}/lse-less-and-step-callers-ab.json", "w") as f:
        json.dump(result, f, indent=1)
    print(f"{'median':>8} {'best':>8} {'paired':>8}  path (paired: ÷ add_, or − its compiled reference, µs)")
    for name, f in figures.items():
        p = result["paired"].get(name)
        print(f"{statistics.median(f):8.2f} {min(f):8.2f} {'' if p is None else format(p['median'], '8.3f'):>8}  "
              f"{name}")
    for label in pairs:
        b, a = (result["paired"][f"{label}: {side}"]["rounds"] for side in ("before", "after"))
        wins = sum(x < y for x, y in zip(a, b))
        print(f"after beat before in {wins} of {ROUNDS} rounds: {label}")


if __name__ == "__main__":
    main(sys.argv[1])
