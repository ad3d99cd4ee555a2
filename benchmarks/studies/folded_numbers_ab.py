"""A specialized op that takes a traced call's plain numbers as arguments (A: the form before, kept to serve every value
while a traced number could not be told from a symbol) against one that holds them as constants (B: the default,
runtime/specialize.py: a number traced as a symbol stays an argument), in one process on the GPU. Each case of
`benchmarks/compiled_bounds.py` (the overhead bench's compiled functions, default mode and reduce-overhead with the
same inputs static, and its ops called through the dispatcher) is built twice, once on each side: the specialized ops
are defined anew there (the ops themselves, the same on both sides, are a control). B runs paired with A in short
blocks (tools/overhead.py's paired_round), ROUNDS rounds; the figure is the median over rounds of B minus A, µs, with
the rounds B won and each dispatcher row's argument count.

    python benchmarks/studies/folded_numbers_ab.py OUT_DIR

Writes OUT_DIR/folded-numbers-ab.json and prints a table.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
from contextlib import contextmanager, nullcontext

import torch

import cukiln
from cukiln import specialize
from cukiln.tools.overhead import difference, paired_round
from cukiln.tools.timing import run_metadata

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import compiled_bounds  # noqa: E402

CALLS, ROUNDS = 5000, 7
_FOLDED = specialize._is_argument


@contextmanager
def numbers_kept():
    """Side A: plain ints and floats taken as arguments of the specialized ops defined meanwhile (bools stay
    constants, as they did)."""
    specialize._is_argument = lambda a: _FOLDED(a) or type(a) in (int, float)
    try:
        yield
    finally:
        specialize._is_argument = _FOLDED


def run_ab(out_dir: str, name: str, side_a, command: str, only=lambda label: True, rounds: int = ROUNDS) -> None:
    """Each case of compiled_bounds.py that ``only`` picks, built on side A (within context manager ``side_a``) and on
    side B (as the runtime stands), B paired with A over ``rounds`` rounds: OUT_DIR/``name``.json and a table."""
    built, arguments = {"A": {}, "B": {}}, {"A": {}, "B": {}}
    for side in ("A", "B"):
        with side_a() if side == "A" else nullcontext():
            for label, (mode, body, _, args, static) in compiled_bounds.cases().items():
                if not only(label):
                    continue
                built[side][label] = compiled_bounds.compile_case(mode, body, args, static)
                if mode == "eager":
                    arguments[side][label] = len(args)
    rows = b_against_a(built, rounds)
    for label, row in rows.items():
        row["arguments"] = {side: arguments[side].get(label) for side in "AB"}
        row["captured"] = {side: getattr(built[side][label], "captured", None) for side in "AB"}
    write_ab(out_dir, name, command, rounds, rows)
    print(f"median over {rounds} rounds of B - A, µs; rounds B won")
    print(f"{'B - A':>7} {'won':>4} {'args A/B':>9} {'captured A/B':>13}  path")
    for label, row in rows.items():
        n = row["arguments"]
        shown_n = "" if n["A"] is None else f"{n['A']}/{n['B']}"
        captured = compiled_bounds.yes_no(row["captured"])
        print(f"{row['b_minus_a_us']:7.2f} {row['b_wins']:>4} {shown_n:>9} {captured:>13}  {label}")


def b_against_a(built: dict, rounds: int) -> dict:
    """label -> B paired with A (``built``: side "A" or "B" -> label -> a zero-argument call, warm) in short blocks,
    ``rounds`` rounds: the median over rounds of B minus A (µs), each round's, the rounds B won and B's µs a call."""
    torch.cuda.synchronize()
    labels = list(built["B"])
    figures = {label: [] for label in labels}
    times = {label: [] for label in labels}
    for _ in range(rounds):
        for label in labels:
            own, figure = paired_round(built["B"][label], built["A"][label], difference, CALLS)
            figures[label].append(figure)
            times[label].append(own)
    return {label: {"b_minus_a_us": statistics.median(figures[label]), "rounds_b_minus_a_us": figures[label],
                    "b_wins": sum(r < 0 for r in figures[label]), "b_us": times[label]} for label in labels}


def write_ab(out_dir: str, name: str, command: str, rounds: int, rows: dict) -> None:
    """OUT_DIR/``name``.json: the run (timing.run_metadata) and each case's row."""
    result = {**run_metadata(name, command), "cukiln": cukiln.__version__, "calls": CALLS, "rounds": rounds,
              "cases": rows}
    with open(f"{out_dir}/{name}.json", "w") as f:
        json.dump(result, f, indent=1)


def main(out_dir: str) -> None:
    run_ab(out_dir, "folded-numbers-ab", numbers_kept, "python benchmarks/studies/folded_numbers_ab.py OUT_DIR")


if __name__ == "__main__":
    main(sys.argv[1])
