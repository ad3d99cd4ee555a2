"""`cukiln report`'s decode section: the split-KV rule in force per arch, and the tuning data behind it
(`cukiln tune decode`, and `decode-fp8` / `decode-paged` for FP8 caches and paged pools): per tuned point the best
(pipeline, split count), the rule's choice and its cost."""

from __future__ import annotations

import itertools

from rich.console import Console
from rich.table import Table

from ..report import copy_note, ratio


def report_rules(tuning: dict) -> dict:
    return decode_rule(tuning)


def print_rules(console: Console, rules: dict) -> None:
    _print_decode_rule(console, rules)


def decode_rule(tuning: dict) -> dict:
    """The split-KV rule in force per arch and, per tuned point, the best (pipeline, split count), the
    rule's choice and what the choice costs against the best (the runner-up's margin when the rule picks
    the best)."""
    from cukiln.generated import dispatch

    from .tune import measured_choice, measured_times

    from cukiln.codegen.decode_family import OWN_TABLES

    tables = {"decode": (dispatch.DECODE_SPLIT, None),
              **{rule: (getattr(dispatch, name), what) for rule, (name, what) in OWN_TABLES.items()}}
    data = {}
    for (arch, tuned), (name, (rules, what)) in itertools.product(sorted(tuning.items()), tables.items()):
        t = tuned.get(name)
        if not t:
            continue
        rule = rules.get(arch, dispatch.DECODE_SPLIT_DEFAULT)
        points = []
        for m in t["measurements"]:
            times = {(p, s): ms for p, by_splits in measured_times(m).items() for s, ms in by_splits.items()}
            ranked = sorted(times, key=times.get)
            splits, pipeline = measured_choice(m, t["sms"], rule)
            best = times[ranked[0]]
            points.append({"batch": m["batch"], "T": m["T"], "best_splits": ranked[0][1],
                           "best_pipeline": ranked[0][0], "chosen_splits": splits, "chosen_pipeline": pipeline,
                           "best_us": best * 1e3, "best_tbps": m.get("best_tbps"),
                           "best_x_copy": m.get("best_x_copy"), "chosen_over_best": times[pipeline, splits] / best,
                           "runner_up_over_best": times[ranked[1]] / best if len(ranked) > 1 else None})
        data[arch if what is None else f"{arch}, {what}"] = {
            "device": t["device"], "date": t["date"], "sms": t["sms"], "rule": t["rule"], "copy_tbps": t.get("copy_tbps"),
            "points": points}
    return {"rules": dict(dispatch.DECODE_SPLIT), "default": dict(dispatch.DECODE_SPLIT_DEFAULT), "tuning": data,
            "own_rules": {what: sorted(tables[rule][0]) for rule, (_, what) in OWN_TABLES.items()}}


def _print_decode_rule(console: Console, rule: dict) -> None:
    def describe(r: dict) -> str:
        if "table" in r:
            from .tune import TIE

            return (f"a K/V pipeline and the least split count within {r.get('tie', TIE):.1%} of the fastest, "
                    f"measured at "
                    f"{len(r['table'])} points")
        return (f"the wave rule with <= {r['blocks_per_sm']} blocks/SM, >= {r['min_keys_per_split']} keys, "
                f"wave efficiency {r['wave_efficiency']}")

    tuned = ", ".join(f"{a}: {describe(r)}" for a, r in sorted(rule["rules"].items())) or "none tuned"
    own = "; ".join(f"{what}: {', '.join(targets) or 'none'}" for what, targets in rule.get("own_rules", {}).items())
    console.print("decode split rule (num_splits= overrides): where tuned, the nearest measured (rows x KV "
                  "heads, T) point's K/V pipeline (the first of narrow, ws, deep, wide, ws_deep within the tie margin "
                  "of the fastest, where the call has a variant of it; a decode step takes ws for ws_deep) and that "
                  "pipeline's total of blocks (the least split count within "
                  "the tie margin of the fastest), shared out over the call's blocks; elsewhere the "
                  "least split count (whole 64-key tiles a split) whose waves of blocks reach wave_efficiency "
                  "of the best count's, with at most blocks_per_sm resident blocks per multiprocessor and at "
                  f"least min_keys_per_split keys per split. Per arch: {tuned}; other archs "
                  f"{describe(rule['default'])}. FP8 caches and paged pools take a table of their own where measured "
                  f"({own}), else the same.")
    for arch, t in sorted(rule["tuning"].items()):
        table = Table(title=f"decode tuning data, {arch}: {t['device']} ({t['sms']} SMs), {t['date']}"
                            f"{copy_note(t)}", title_justify="left")
        for col in ("b", "T", "best pipeline x splits", "best us", "best TB/s", "x copy", "rule's pipeline x splits",
                    "rule / best", "runner-up / best"):
            table.add_column(col, justify="right")
        for p in t["points"]:
            loss = p["chosen_over_best"]
            table.add_row(str(p["batch"]), str(p["T"]), f"{p['best_pipeline']} x {p['best_splits']}",
                          f"{p['best_us']:.1f}", f"{p['best_tbps']:.2f}" if p["best_tbps"] else "-",
                          ratio(p["best_x_copy"]), f"{p['chosen_pipeline']} x {p['chosen_splits']}", f"[{'red' if loss > 1.03 else 'green'}]{loss:.3f}[/]",
                          f"{p['runner_up_over_best']:.3f}" if p["runner_up_over_best"] else "-")
        console.print(table)
