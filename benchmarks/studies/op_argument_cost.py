"""What torch's dispatcher charges an op whose kernel is Python, by the op's argument count: ops of 1 to 24
arguments (the shapes of cukiln's schemas: tensors, optional tensors given None, ints, floats, strings) whose
kernel does nothing, called eagerly through the dispatcher and from a torch.compile'd function, beside a plain
Python call. Any machine (CPU tensors); best of 7 rounds, µs a call.

It asks whether folding an op's static arguments into one (a plan handle made when a call is traced) would cut a
compiled cukiln call's host time (`cukiln bench overhead`: rope's op costs 30 µs through the dispatcher on the
H100 host against 16 eagerly; benchmarks/NOTES.md, "Floors under the host targets").

Run from the repository root: PYTHONPATH=. python benchmarks/studies/op_argument_cost.py
"""

from __future__ import annotations

import timeit

import torch

# argument kinds after the first tensor, in the order cukiln's rope_ schema mixes them
KINDS = ("Tensor?", "Tensor?", "float", "float", "str", "bool", "int?", "int", "Tensor?", "float?", "int", "int",
         "Tensor?", "Tensor?", "float", "str", "bool", "int?", "Tensor?", "Tensor?", "int", "int", "bool")
VALUES = {"Tensor?": None, "float": 1.0, "float?": None, "str": "sbhd", "bool": False, "int?": None, "int": 0}
COUNTS = (1, 4, 8, 12, 16, 24)


def _ops(library: torch.library.Library) -> dict:
    """count -> (op, its arguments after the tensor): ``touch_<count>(Tensor(a!) x, ...) -> ()``, kernel a no-op."""
    ops = {}
    for count in COUNTS:
        kinds = KINDS[:count - 1]
        name = f"touch_{count}"
        library.define(f"{name}(Tensor(a!) x" + "".join(f", {k} a{i}" for i, k in enumerate(kinds)) + ") -> ()")
        library.impl(name, lambda x, *args: None, "CompositeExplicitAutograd")
        torch.library.register_fake(f"op_argument_cost::{name}", lambda x, *args: None, lib=library)
        ops[count] = (getattr(torch.ops.op_argument_cost, name).default, tuple(VALUES[k] for k in kinds))
    return ops


def best_us(fn, number: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    library = torch.library.Library("op_argument_cost", "DEF")
    ops = _ops(library)
    x = torch.zeros(4)
    print(f"torch {torch.__version__}, CPU; µs a call (best of 7 rounds)")
    print(f"{'arguments':>9} {'python call':>12} {'dispatcher':>11} {'compiled':>9}")
    for count, (op, rest) in ops.items():
        kernel = lambda t, *args: None  # noqa: E731 (what the dispatcher reaches)
        compiled = torch.compile(lambda t, op=op, rest=rest: op(t, *rest), fullgraph=True)
        compiled(x)
        print(f"{count:>9} {best_us(lambda: kernel(x, *rest), 200000):>12.2f} "
              f"{best_us(lambda: op(x, *rest), 20000):>11.2f} {best_us(lambda: compiled(x), 5000):>9.2f}")


if __name__ == "__main__":
    main()
