"""The table the A/B scripts print (ab_cubins.sh, ab_trees.sh with a bench other than overhead): each cukiln case's
ratio to the same run's copy in every run of a bench, read from OUT/<name>-<n>-<A|B>.json (runs in the order
A B B A), and B's mean over A's. Every list of cases in the JSON is read ("cases", the decode step's "cases_<set>",
rope-qk's "mrope", and a lone case such as rope-qk's "transposed"), and every cukiln contender in a case (rope's
"cukiln", rope-thd's "auto", the decode step's "cukiln decode_step", "cukiln separate calls", ...).

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
    if "tokens" in case:  # rope-qk's cases and its M-RoPE ones
        rest = f"sections {case['sections']}" if "sections" in case else f"{case.get('pairing')} {case.get('cache')}"
        return f"t={case['tokens']} heads {case['heads_q']}/{case['heads_k']} {rest}"
    if "shape" in case:  # rope-qk's transposed storage
        shape = case["shape"]
        return f"{shape.get('storage')} read as {shape.get('read_as')} s={shape.get('s')}"
    return f"b={case['batch']} T={case.get('T', case.get('cache_len'))}"


def sides(case: dict) -> list[str]:
    """The case's cukiln contenders: the keys whose value is a timing of cukiln."""
    return [k for k, v in case.items() if isinstance(v, dict) and (k == "auto" or k.startswith("cukiln"))]


def case_lists(result: dict) -> dict[str, list[dict]]:
    """The result's lists of cases with a cukiln contender (a lone case as a list of one), by key."""
    found = {}
    for key, value in result.items():
        cases = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
        if cases and all(isinstance(c, dict) and any(ratio(c[side]) is not None for side in sides(c)) for c in cases):
            found[key] = cases
    return found


def ratio(side: dict | None) -> float | None:
    """A contender's ratio to the copy (or its TB/s), None where the run did not time it (it errored)."""
    if not side or not ("x_copy" in side or "tbps" in side):
        return None
    return side["x_copy"] if "x_copy" in side else side["tbps"]


def main(out: str, names: list[str]) -> None:
    for name in names:
        runs = sorted(glob.glob(f"{out}/{name}-[0-9]-*.json"))
        if not runs:
            continue
        data = [json.load(open(p)) for p in runs]
        tags = [p.rsplit("-", 2)[-2] + p.rsplit("-", 1)[-1][0] for p in runs]
        lists = [case_lists(d) for d in data]
        for key, cases in lists[0].items():
            print(f"{name} {key}: x copy".ljust(64) + "".join(f"{t:>7}" for t in tags))
            for k, case in enumerate(cases):
                for side in sides(case):
                    values = [ratio(run[key][k].get(side)) if key in run else None for run in lists]
                    a = [v for v, t in zip(values, tags) if t.endswith("A") and v is not None]
                    b = [v for v, t in zip(values, tags) if t.endswith("B") and v is not None]
                    head = label(case) + ("" if side in ("cukiln", "auto") else f" {side}")
                    line = head[:63].ljust(64) + "".join("      -" if v is None else f"{v:7.3f}" for v in values)
                    if a and b:
                        line += f"   B/A {sum(b) / len(b) / (sum(a) / len(a)):6.3f}"
                    print(line)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
