"""A compiled cukiln.torch call with its wrapper traced by Dynamo (A: the wrapper's Python inlined, its reads
guarded) against the wrapper as one node of Dynamo's graph (B: torch_support.one_graph_node, the default), in one
process on the GPU. A is a copy of each wrapper (the same code, defaults and globals; tools/overhead.py's distinct)
that torch.compile does not know as a graph node, so it traces it as it traced every wrapper before. Each compiled
function of `cukiln bench overhead` is compiled twice, once around each, in default mode and under reduce-overhead
(with the inputs static that the bench's rows mark); B runs paired with A in short blocks, ROUNDS rounds
(folded_numbers_ab.py's b_against_a), and the figure is the median over rounds of B minus A. Also records each
side's guards.

    python benchmarks/studies/one_graph_node_ab.py OUT_DIR

Writes OUT_DIR/one-graph-node-ab.json and prints a table.
"""

from __future__ import annotations

import io
import logging
import pathlib
import sys
import types

import torch

import cukiln.torch as ct
from cukiln.tools.overhead import distinct
from folded_numbers_ab import b_against_a, write_ab

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import compiled_bounds  # noqa: E402

ROUNDS = 7


def cases(w) -> list:
    """(mode, label, function, arguments, static indices) for the wrappers in namespace ``w``."""
    e = compiled_bounds.example_inputs()
    x, freqs, qkv, table, positions, q, k, v, s, step = (e.x, e.freqs, e.qkv, e.table, e.positions, e.q, e.k, e.v,
                                                          e.s, e.step)

    def qk_sliced(qkv, cache=table):
        w.rope_qk(qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128), cos_sin_cache=cache,
                  positions=positions, layout="thd", inplace=True)
        return qkv

    def decode(t, kc=k, vc=v):
        return w.decode_attention(t, kc, vc, 64)

    def step_call(*t):
        return w.decode_step(*t, cos_sin_cache=s["cos_sin"])

    reduce = "reduce-overhead"
    return [
        (None, "rope in place (base)", lambda t: w.rope(t, base=10000.0, inplace=True), (x,), ()),
        (None, "rope allocating (freqs)", lambda t: w.rope(t, freqs=freqs), (x,), ()),
        (None, "rope_qk in place (q and k sliced inside)", qk_sliced, (qkv,), ()),
        (None, "decode_attention (b=1, T=64)", decode, (q,), ()),
        (None, "decode_step (b=1, T=64, device lengths)", step_call, step, ()),
        (reduce, "rope allocating (base)", lambda t: w.rope(t, base=10000.0), (x,), ()),
        (reduce, "rope in place (base), x static", lambda t: w.rope(t, base=10000.0, inplace=True), (x.clone(),),
         (0,)),
        (reduce, "rope_qk in place, qkv static", qk_sliced, (qkv.clone(),), (0,)),
        (reduce, "rope_qk in place, qkv and the cos|sin cache static", qk_sliced, (qkv.clone(), table.clone()),
         (0, 1)),
        (reduce, "decode_attention (b=1, T=64)", decode, (q,), ()),
        (reduce, "decode_attention, caches static", decode, (q, k.clone(), v.clone()), (1, 2)),
        (reduce, "decode_step, every input static", step_call, tuple(t.clone() for t in step), tuple(range(6))),
    ]


def compiled(mode, body, args, static):
    """(a zero-argument call of torch.compile(fullgraph=True, mode=mode) of ``body`` on ``args``, warm; its
    guards' count; whether torch captured it, None outside reduce-overhead)."""
    from torch._dynamo.utils import counters

    for i in static:
        torch._dynamo.mark_static_address(args[i])
    fn = torch.compile(distinct(body), fullgraph=True, mode=mode)
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    torch._logging.set_logs(guards=True)
    logging.getLogger("torch._dynamo").addHandler(handler)
    skips = counters["inductor"]["cudagraph_skips"]
    try:
        for _ in range(50):
            fn(*args)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(handler)
        torch._logging.set_logs(guards=False)
    guards = sum("_MATCH" in line or "GUARD" in line or "ALIASING" in line or "DICT_" in line
                 for line in text.getvalue().splitlines())
    captured = None if mode is None else counters["inductor"]["cudagraph_skips"] == skips
    return (lambda: fn(*args)), guards, captured


def main(out_dir: str) -> None:
    traced = types.SimpleNamespace(**{name: distinct(getattr(ct, name))
                                      for name in ("rope", "rope_qk", "decode_attention", "decode_step")})
    sides = {"A traced": cases(traced), "B one node": cases(ct)}
    built = {side: [compiled(mode, body, args, static) for mode, _, body, args, static in found]
             for side, found in sides.items()}
    labels = [f"{mode or 'default'}: {label}" for mode, label, *_ in sides["B one node"]]
    rows = b_against_a({side[0]: {label: made[0] for label, made in zip(labels, built[side])} for side in built},
                       ROUNDS)
    for i, label in enumerate(labels):
        rows[label]["guards"] = {side[0]: built[side][i][1] for side in built}
        rows[label]["captured"] = {side[0]: built[side][i][2] for side in built}
    write_ab(out_dir, "one-graph-node-ab", "python benchmarks/studies/one_graph_node_ab.py OUT_DIR", ROUNDS, rows)
    print(f"median over {ROUNDS} rounds of B - A, µs (each round's: the median over its pairs of blocks)")
    print(f"{'B - A':>7} {'guards A/B':>11} {'captured A/B':>13}  compiled function")
    for label, row in rows.items():
        g = row["guards"]
        captured = compiled_bounds.yes_no(row["captured"])
        print(f"{row['b_minus_a_us']:7.2f} {g['A']:>5}/{g['B']:<5} {captured:>13}  {label}")


if __name__ == "__main__":
    main(sys.argv[1])
