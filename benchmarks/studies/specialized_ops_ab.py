"""Compiled cukiln calls through the ops themselves against ops specialized to the calls' constants
(runtime/specialize.py), in one process (GPU): each call's torch.compile'd function traced twice, once under
``traced_ops=generic`` and once under the default, and each op called through the dispatcher as itself and
specialized, beside torch's ``add_`` and ``+`` eager and compiled. The paths take turns over ROUNDS rounds, so that
the host's noise falls on both sides alike (two processes, as benchmarks/studies/ab_overhead.sh runs them, saw the
whole of one side faster, torch's own rows included).

    python benchmarks/studies/specialized_ops_ab.py OUT_DIR

Writes OUT_DIR/specialized-ops-ab.json (µs per call, median and each round) and prints a table: each pair's
generic and specialized medians and their ratio, and each compiled path's margin over compiled ``add_`` (or
``t + 1`` for an allocating call).
"""

from __future__ import annotations

import json
import statistics
import sys
import types

import torch

import cukiln
import cukiln.torch as ct
from cukiln import overrides, rope_torch
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import per_call_us, specialized_op

CALLS, ROUNDS = 3000, 9


def _inputs() -> dict:
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    n = {"y": torch.randn(64, device="cuda"), "x": torch.randn(1, 1, 1, 64, device="cuda"),
         "freqs": torch.rand(1, 64, device="cuda"),
         "qkv": torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16),
         "table": torch.rand(4096, 128, device="cuda"),
         "positions": torch.zeros(1, device="cuda", dtype=torch.int64),
         "q": torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16),
         "k": torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16), "s": s,
         "step": tuple(s[name] for name in ("q", "k", "v", "k_cache", "v_cache", "lens"))}
    n["v"] = torch.randn_like(n["k"])
    return n


def _compiled_bodies(n: dict) -> dict:
    """label -> (function, its arguments, the torch reference it is held against)."""
    def qk_sliced(qkv):  # q and k sliced inside the function, as a serving step's projection gives them
        q, k = qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)
        ct.rope_qk(q, k, cos_sin_cache=n["table"], positions=n["positions"], layout="thd", inplace=True)
        return qkv

    table = n["s"]["cos_sin"]
    return {
        "rope in place (base)": (lambda t: ct.rope(t, base=10000.0, inplace=True), (n["x"],), "add_"),
        "rope allocating (freqs)": (lambda t: ct.rope(t, freqs=n["freqs"]), (n["x"],), "t + 1"),
        "rope_qk in place (q, k sliced inside)": (qk_sliced, (n["qkv"],), "add_"),
        "decode_attention": (lambda t: ct.decode_attention(t, n["k"], n["v"], 64), (n["q"],), "t + 1"),
        "decode_step": (lambda *t: ct.decode_step(*t, cos_sin_cache=table), n["step"], "add_"),
    }


def _op_rows(n: dict) -> dict:
    """label -> (the op through the dispatcher, the op specialized to the call's constants)."""
    kw = rope_torch.rope_api.rope.__kwdefaults__
    rope_args = tuple(dict(kw, base=10000.0).get(name) for name in rope_torch.OP_ARGUMENTS)
    step_args = (*n["step"], "bhsd", None, 0, None, None, None, None, n["s"]["cos_sin"], None, None, 1.0, 1.0, False,
                 None, 0, None, None, 1e-6, None, None, None, False)
    decode_args = (n["q"], n["k"], n["v"], None, 64, "bhsd", None, 0, None, None, None, False)
    rows = {"rope_": (n["x"], *rope_args), "decode_attention": decode_args, "decode_step": step_args}
    return {name: (lambda op=getattr(torch.ops.cukiln, name), a=args: op(*a), specialized_op(name, args))
            for name, args in rows.items()}


def _copy(fn, tag: str):
    """``fn`` with a code object of its own: torch.compile keeps its graphs per code object, so the two sides of a
    pair must not share one."""
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def main(out_dir: str) -> None:
    n = _inputs()
    y = n["y"]
    paths = {"torch add_ [eager]": lambda: y.add_(1.0), "torch t + 1 [eager]": lambda: y + 1.0}
    for label, body in (("torch add_", lambda t: t.add_(1.0)), ("torch t + 1", lambda t: t + 1.0)):
        fn = torch.compile(body, fullgraph=True)
        paths[f"{label} [compiled]"] = lambda fn=fn: fn(y)
    for label, (body, args, _) in _compiled_bodies(n).items():
        for choice in ("generic", "auto"):
            with overrides.forced("traced_ops", choice):
                fn = torch.compile(_copy(body, choice), fullgraph=True)
                for _ in range(20):
                    fn(*args)
            paths[f"compiled {label} [{'specialized' if choice == 'auto' else 'generic'}]"] = (
                lambda fn=fn, args=args: fn(*args))
    for name, (generic, specialized) in _op_rows(n).items():
        paths[f"op {name} through the dispatcher [generic]"] = generic
        paths[f"op {name} through the dispatcher [specialized]"] = specialized
    for fn in paths.values():
        for _ in range(50):
            fn()
    figures = {label: [] for label in paths}
    for _ in range(ROUNDS):
        for label, fn in paths.items():
            figures[label].append(per_call_us(fn, CALLS))
    medians = {label: statistics.median(f) for label, f in figures.items()}
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cukiln": cukiln.__version__,
              "calls": CALLS, "rounds": ROUNDS,
              "paths": {label: {"us_per_call": medians[label], "rounds_us": figures[label]} for label in paths}}
    with open(f"{out_dir}/specialized-ops-ab.json", "w") as f:
        json.dump(result, f, indent=1)
    for label in ("torch add_", "torch t + 1"):
        print(f"{label}: eager {medians[label + ' [eager]']:.2f}, compiled {medians[label + ' [compiled]']:.2f}")
    print(f"{'path':58s} {'generic':>8s} {'special':>8s} {'ratio':>6s}  over compiled torch (generic / special)")
    for label, (_, _, reference) in _compiled_bodies(n).items():
        g, s = medians[f"compiled {label} [generic]"], medians[f"compiled {label} [specialized]"]
        ref = medians[f"torch {reference} [compiled]"]
        margins = f"{g - ref:+.2f} / {s - ref:+.2f} ({reference})"
        print(f"{'compiled ' + label:58s} {g:8.2f} {s:8.2f} {s / g:6.3f}  {margins}")
    for name in _op_rows(n):
        g = medians[f"op {name} through the dispatcher [generic]"]
        s = medians[f"op {name} through the dispatcher [specialized]"]
        print(f"{'op ' + name + ' through the dispatcher':58s} {g:8.2f} {s:8.2f} {s / g:6.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
