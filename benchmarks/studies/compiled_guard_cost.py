"""What a compiled cukiln call's guards cost the host (CPU): each function compiled with a backend whose graph does
nothing (it returns outputs made once), so that a call is Dynamo's frame hook and guard evaluation alone; the
cukiln wrapper's function beside the same call of the specialized op it traces to (its tensors closed over alike)
and beside torch's ``add_``. The wrapper's traced Python leaves guards on what it read (its defaults, builtins,
cukiln's module globals, and Python-evaluated guards where one object was reached through two modules); the direct
call leaves the tensors' and the op's. Also prints the guards of the wrapper's function.

    python benchmarks/studies/compiled_guard_cost.py
"""

from __future__ import annotations

import io
import logging
import statistics
import time

import torch

import cukiln.torch as ct
from cukiln import specialize

CALLS, ROUNDS = 20_000, 11


def outputs_made_once(gm, example_inputs):
    """A backend: the graph replaced by returning tensors made once, as many as it returns."""
    outs = gm.graph.output_node().args[0]
    made = tuple(torch.empty(1) for _ in outs) if isinstance(outs, (tuple, list)) else torch.empty(1)
    return lambda *args: made


def guards_of(fn, arg) -> list[str]:
    """The guard lines torch.compile logs for ``fn`` traced on ``arg``."""
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    torch._logging.set_logs(guards=True)
    logging.getLogger("torch._dynamo").addHandler(handler)
    try:
        torch.compile(fn, backend=outputs_made_once, fullgraph=True)(arg)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(handler)
        torch._logging.set_logs(guards=False)
    return [line for line in text.getvalue().splitlines() if "+- " in line and "GuardManager" not in line]


def main() -> None:
    q = torch.randn(1, 32, 128, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 64, 128, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    x, y = torch.randn(1, 1, 1, 64), torch.randn(64)
    op, given = specialize.specialization("decode_attention", (q, k, v, None, 64, "bhsd", None, 0, None, None, None,
                                                               False), lse=False)
    cases = {"torch add_": (lambda t: t.add_(1.0), y),
             "the specialized decode_attention op called directly": (lambda t: op(t, k, v, 64, 0), q),
             "cukiln.torch.decode_attention": (lambda t: ct.decode_attention(t, k, v, 64), q),
             "cukiln.torch.rope (in place, base)": (lambda t: ct.rope(t, base=10000.0, inplace=True), x)}
    guards = {}
    for name, (fn, arg) in cases.items():
        lines = guards[name] = guards_of(fn, arg)
        compiled = torch.compile(fn, backend=outputs_made_once, fullgraph=True)
        compiled(arg)
        rounds = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            for _ in range(CALLS):
                compiled(arg)
            rounds.append((time.perf_counter() - start) / CALLS * 1e6)
        lambdas = sum("LAMBDA_GUARD" in line for line in lines)
        print(f"{statistics.median(rounds):7.3f} µs median, {min(rounds):7.3f} best, {len(lines):3d} guards "
              f"({lambdas} Python-evaluated): {name}")
    print("\nthe guards of cukiln.torch.decode_attention's function:")
    for line in guards["cukiln.torch.decode_attention"]:
        print(line[line.index("+- "):][:150])


if __name__ == "__main__":
    main()
