"""The table the A/B scripts print (ab_cubins.sh, ab_trees.sh with a bench other than overhead): each case's ratio to
the same run's copy in every run of a bench, read from OUT/<name>-<n>-<A|B>.json (runs in the order A B B A), and
B's mean over A's.

    python3 benchmarks/ab_table.py OUT NAME [NAME ...]
"""

from __future__ import annotations

import glob
import json
import sys


def label(case: dict) -> str:
    if "shape_sbhd" in case:
        return f"{case['shape_sbhd']} {case['view'][:4]} {case['dtype']} {case['direction']}"
    if "lengths" in case:
        return f"{case['lengths']['n_seqs']} seqs"
    return f"b={case['batch']} T={case['T']}"


def ratio(case: dict) -> float:
    side = case.get("cukiln") or case.get("auto")
    return side["x_copy"] if "x_copy" in side else side["tbps"]


def main(out: str, names: list[str]) -> None:
    for name in names:
        runs = sorted(glob.glob(f"{out}/{name}-[0-9]-*.json"))
        if not runs:
            continue
        data = [json.load(open(p)) for p in runs]
        tags = [p.rsplit("-", 2)[-2] + p.rsplit("-", 1)[-1][0] for p in runs]
        print(f"{name}: x copy".ljust(44) + "".join(f"{t:>7}" for t in tags))
        for k, case in enumerate(data[0]["cases"]):
            values = [ratio(d["cases"][k]) for d in data]
            a = [v for v, t in zip(values, tags) if t.endswith("A")]
            b = [v for v, t in zip(values, tags) if t.endswith("B")]
            line = label(case).ljust(44) + "".join(f"{v:7.3f}" for v in values)
            if a and b:
                line += f"   B/A {sum(b) / len(b) / (sum(a) / len(a)):6.3f}"
            print(line)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
