"""Where a compiled rope_qk call's margin over compiled ``add_`` goes (GPU): the bench's compiled function (q and k
sliced from one projection inside it, the cos|sin cache and positions closed over, qkv returned) beside the same
function changed one thing at a time, and the specialized op the graph calls, called directly with the views made
per call (as the compiled graph makes them) and with views made once. Compiled forms are paired with compiled
``add_``, direct calls with eager ``add_``: PAIRS pairs of BLOCK-call blocks in turns, median and quartiles of the
differences.

    python benchmarks/studies/compiled_rope_qk_parts.py OUT_DIR

Writes OUT_DIR/compiled-rope-qk-parts.json.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

import cukiln.torch as ct
from cukiln import rope_api, rope_torch, specialize
from cukiln.tools.overhead import compiled, per_call_us
from cukiln.tools.timing import run_metadata

ROUNDS, PAIRS_PER_ROUND, BLOCK = 5, 8, 500
reinterpret = torch._C._dynamo.guards._reinterpret_tensor  # what Inductor's output code makes a view with

y = torch.randn(1, 1, 1, 64, device="cuda")
x = torch.randn(1, 1, 1, 64, device="cuda")
qkv = torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16)  # one token's fused projection, GQA 32/8
table = torch.rand(4096, 128, device="cuda")
positions = torch.zeros(1, device="cuda", dtype=torch.int64)
q, k = qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)


def rotate(q, k, table, positions):
    return ct.rope_qk(q, k, cos_sin_cache=table, positions=positions, layout="thd", inplace=True)


def sliced(qkv):
    return qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)


def bench_form(qkv):  # the bench's row: table and positions closed over, qkv returned
    rotate(*sliced(qkv), table, positions)
    return qkv


def tensors_as_arguments(qkv, table, positions):
    rotate(*sliced(qkv), table, positions)
    return qkv


def returning_nothing(qkv, table, positions):
    rotate(*sliced(qkv), table, positions)


def views_given(q, k, table, positions):  # two inputs aliasing one storage: torch.compile copies it in and back
    rotate(q, k, table, positions)


def specialized_calls():
    """The specialized op the graph calls, on its arguments: with q and k made per call as the graph makes them, and
    with the views made once."""
    defaults = dict(rope_api.rope.__kwdefaults__, base=None, cos_sin_cache=table, positions=positions, layout="thd")
    op, given = specialize.specialization("rope_qk_", (q, k) + tuple(defaults.get(n) for n in rope_torch.OP_ARGUMENTS))
    at_q, at_k = next(i for i, g in enumerate(given) if g is q), next(i for i, g in enumerate(given) if g is k)

    def views_per_call():
        arguments = list(given)
        arguments[at_q] = reinterpret(qkv, (1, 32, 128), (6144, 128, 1), 0)
        arguments[at_k] = reinterpret(qkv, (1, 8, 128), (6144, 128, 1), 4096)
        op(*arguments)

    return views_per_call, lambda: op(*given)


def main(out_dir: str) -> None:
    views_per_call, views_once = specialized_calls()
    references = {"compiled": compiled(lambda t: t.add_(1.0), y), "eager": lambda: y.add_(1.0)}
    forms = {
        "compiled rope in place (one tensor, for scale)": ("compiled", compiled(
            lambda t: ct.rope(t, base=10000.0, inplace=True), x)),
        "compiled rope_qk, the bench's form (closures, qkv returned)": ("compiled", compiled(bench_form, qkv)),
        "compiled rope_qk, table and positions as arguments": ("compiled", compiled(tensors_as_arguments, qkv, table,
                                                                                      positions)),
        "compiled rope_qk, as arguments, returning nothing": ("compiled", compiled(returning_nothing, qkv, table,
                                                                                    positions)),
        "compiled rope_qk on q and k given (aliasing inputs)": ("compiled", compiled(views_given, q, k, table,
                                                                                      positions)),
        "the specialized op, views made per call": ("eager", views_per_call),
        "the specialized op, views made once": ("eager", views_once),
    }
    for fn in list(references.values()) + [fn for _, fn in forms.values()]:
        for _ in range(300):  # compiled, plans cached
            fn()
    torch.cuda.synchronize()
    differences = {name: [] for name in forms}
    for _ in range(ROUNDS):
        for name, (mode, fn) in forms.items():
            for _ in range(PAIRS_PER_ROUND):
                reference = per_call_us(references[mode], BLOCK)
                differences[name].append(per_call_us(fn, BLOCK) - reference)
    rows = {}
    for name, d in differences.items():
        ordered = sorted(d)
        n = len(ordered)
        rows[name] = {"reference": forms[name][0] + " add_", "median_us": statistics.median(d),
                      "quartiles_us": [ordered[n // 4], ordered[3 * n // 4]], "differences_us": d}
        print(f"{rows[name]['median_us']:+7.2f} µs [{ordered[n // 4]:+.2f}, {ordered[3 * n // 4]:+.2f}] over "
              f"{forms[name][0]} add_: {name}")
    result = {**run_metadata("compiled-rope-qk-parts", "python benchmarks/studies/compiled_rope_qk_parts.py OUT_DIR"),
              "block_calls": BLOCK, "pairs": ROUNDS * PAIRS_PER_ROUND, "forms": rows}
    with open(f"{out_dir}/compiled-rope-qk-parts.json", "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
