"""What a compiled cukiln call's guards cost the host (CPU; its tensors on the GPU where there is one, as a traced
wrapper then takes the path of a real call, which reads more): each function compiled with a backend whose graph does
nothing (it returns outputs made once), so that a call is Dynamo's frame hook and guard evaluation alone; the
cukiln wrapper's function beside the same call of the specialized op it traces to (its tensors closed over alike)
and beside torch's ``add_``. The wrapper's traced Python leaves guards on what it read (its defaults, builtins,
cukiln's module globals, and Python-evaluated guards where one object was reached through two modules); the direct
call leaves the tensors' and the op's. Also prints the guards of the wrapper's function.

    python benchmarks/studies/compiled_guard_cost.py [OUT_JSON]
"""

from __future__ import annotations

import io
import json
import logging
import statistics
import sys
import time

import torch

import cukiln.torch as ct
from cukiln import specialize

CALLS, ROUNDS = 10_000, 15


def outputs_made_once(gm, example_inputs):
    """A backend: the graph replaced by returning tensors made once, as many as it returns."""
    outs = gm.graph.output_node().args[0]
    made = tuple(torch.empty(1) for _ in outs) if isinstance(outs, (tuple, list)) else torch.empty(1)  # never used
    return lambda *args: made


def guards_of(fn, *args) -> list[str]:
    """The guard lines torch.compile logs for ``fn`` traced on ``args``."""
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    torch._logging.set_logs(guards=True)
    logging.getLogger("torch._dynamo").addHandler(handler)
    try:
        torch.compile(fn, backend=outputs_made_once, fullgraph=True)(*args)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(handler)
        torch._logging.set_logs(guards=False)
    return [line for line in text.getvalue().splitlines() if "+- " in line and "GuardManager" not in line]


def main(out: str | None = None) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q = torch.randn(1, 32, 128, dtype=torch.bfloat16, device=device)
    k = torch.randn(1, 8, 64, 128, dtype=torch.bfloat16, device=device)
    v = torch.randn_like(k)
    x, y = torch.randn(1, 1, 1, 64, device=device), torch.randn(64, device=device)
    print(f"tensors on {device}")
    op, given = specialize.specialization("decode_attention", (q, k, v, None, 64, "bhsd", None, 0, None, None, None,
                                                               False), lse=False)
    qkv = torch.randn(1, 48 * 128, dtype=torch.bfloat16, device=device)
    table, positions = torch.rand(4096, 128, device=device), torch.zeros(1, dtype=torch.int64, device=device)
    caches = torch.zeros(1, 8, 64, 128, dtype=torch.bfloat16, device=device), torch.zeros_like(k)
    step = (q, k[:, :, 0], v[:, :, 0], *caches, torch.full((1,), 5, dtype=torch.int32, device=device))

    def qk_sliced(qkv):
        ct.rope_qk(qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128), cos_sin_cache=table,
                   positions=positions, layout="thd", inplace=True)
        return qkv

    cases = {"torch add_": (lambda t: t.add_(1.0), (y,)),
             "the specialized decode_attention op called directly": (lambda t: op(t, k, v, 64, 0), (q,)),
             "cukiln.torch.decode_attention": (lambda t: ct.decode_attention(t, k, v, 64), (q,)),
             "cukiln.torch.rope (in place, base)": (lambda t: ct.rope(t, base=10000.0, inplace=True), (x,)),
             "cukiln.torch.rope_qk (in place, q and k sliced inside)": (qk_sliced, (qkv,)),
             "cukiln.torch.decode_step": (lambda *t: ct.decode_step(*t, cos_sin_cache=table), step)}
    guards, compiled = {}, {}
    for name, (fn, args) in cases.items():
        guards[name] = guards_of(fn, *args)
        compiled[name] = (torch.compile(fn, backend=outputs_made_once, fullgraph=True), args)
        compiled[name][0](*args)
    rounds = {name: [] for name in cases}
    for _ in range(ROUNDS):  # the cases take turns, so that a noisy host's moments fall on each alike
        for name, (fn, args) in compiled.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                fn(*args)
            rounds[name].append((time.perf_counter() - start) / CALLS * 1e6)
    direct = rounds["the specialized decode_attention op called directly"]
    for name, figures in rounds.items():
        lines = guards[name]
        lambdas = sum("LAMBDA_GUARD" in line for line in lines)
        over = statistics.median(f - d for f, d in zip(figures, direct))
        print(f"{statistics.median(figures):7.3f} µs median, {min(figures):7.3f} best, {over:+7.3f} over the direct "
              f"call (median of rounds), {len(lines):3d} guards ({lambdas} Python-evaluated): {name}")
    if out is not None:
        with open(out, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "calls": CALLS, "rounds_us": rounds,
                       "guards": {n: len(g) for n, g in guards.items()},
                       "python_guards": {n: sum("LAMBDA_GUARD" in x for x in g) for n, g in guards.items()}}, f,
                      indent=1)
    for name, lines in guards.items():
        print(f"\nthe guards evaluated in Python, {name}:")
        for line in lines:
            if "LAMBDA_GUARD" in line:
                print(line[line.index("+- "):][:200])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
