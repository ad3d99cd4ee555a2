"""`cukiln report`'s RoPE section: the dense launch rule and the thd token/grid rule in force per arch, and the
tuning data behind them (`cukiln tune rope`, `cukiln tune rope-thd`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..report import copy_note, ratio


def report_rules(tuning: dict) -> dict:
    return {"launch": launch_rule(tuning), "thd": thd_rule(tuning)}


def print_rules(console: Console, rules: dict) -> None:
    _print_launch_rule(console, rules["launch"])
    _print_thd_rule(console, rules["thd"])


def launch_rule(tuning: dict) -> dict:
    """The dense RoPE launch choices in force per arch (from dispatch.py), and per arch the tuning behind
    them: each choice's candidates with their time relative to the default, the winner and its margin."""
    from cukiln.generated import dispatch

    data = {}
    for arch, t in sorted(tuning.items()):
        t = t.get("rope")
        if t:
            data[arch] = {"device": t["device"], "date": t["date"], "rule": t["rule"], "choices": t["choices"],
                          "combined_relative_time": t.get("combined_relative_time")}
    return {"rules": dict(dispatch.ROPE_LAUNCH), "default": dict(dispatch.ROPE_LAUNCH_DEFAULT), "tuning": data}


def thd_rule(tuning: dict) -> dict:
    """The token/grid rule in force (from dispatch.py) and the tuning data behind it, per arch."""
    from cukiln.generated import dispatch

    data = {}
    for arch, t in sorted(tuning.items()):
        t = t.get("rope-thd")
        if t:
            data[arch] = {"device": t["device"], "date": t["date"], "rule": t["rule"], "copy_tbps": t.get("copy_tbps"),
                          "measurements": [{"tokens": m["lengths"]["tokens"], "n_seqs": m["lengths"]["n_seqs"],
                                            "skewed": m.get("skewed", False),
                                            "grid_over_token_blocks": m["grid"]["blocks"] / m["token"]["blocks"],
                                            "token_us": m["token"]["ms"] * 1e3, "grid_us": m["grid"]["ms"] * 1e3,
                                            "token_x_copy": m["token"].get("x_copy"),
                                            "grid_x_copy": m["grid"].get("x_copy")}
                                           for m in t["measurements"]]}
    return {"grid_max_waste": dict(dispatch.ROPE_THD_GRID_MAX_WASTE),
            "default": dispatch.ROPE_THD_GRID_MAX_WASTE_DEFAULT, "tuning": data}


def _print_launch_rule(console: Console, rule: dict) -> None:
    def describe(r: dict) -> str:
        return (f"vectors <= {r['max_vector_bytes']} B, {'stride-free' if r['packed_kernel'] else 'strided'} kernel "
                f"for packed tensors, {r['min_threads']}-{r['max_threads']} threads/block, "
                f"{r['head_passes']} pass{'es' if r['head_passes'] > 1 else ''} over the heads")

    tuned = ", ".join(f"{a}: {describe(r)}" for a, r in sorted(rule["rules"].items())) or "none tuned"
    console.print(f"rope launch rule (dense layouts): per arch {tuned}; other archs and thd {describe(rule['default'])}.")
    for arch, t in sorted(rule["tuning"].items()):
        console.print(launch_tuning_table(arch, t))


def launch_tuning_table(arch: str, t: dict) -> Table:
    """`cukiln tune rope`'s data for one arch: per choice, the candidates, the winner and its margin."""
    table = Table(title=f"rope launch tuning, {arch}: {t['device']}, {t['date']} (time relative to the default, "
                        "geometric mean over the cases a value changes)", title_justify="left")
    for col in ("choice", "candidates: relative time (cases)", "winner", "runner-up", "margin"):
        table.add_column(col, justify="left" if col.startswith("c") else "right")
    for c in t["choices"]:
        cands = ", ".join(f"{x['value']}: {x['relative_time']:.3f} ({x['cases']})" for x in c["candidates"])
        table.add_row(c["choice"], cands, str(c["winner"]), str(c["runner_up"]), f"{c['margin'] * 100:.1f} %")
    return table


def _print_thd_rule(console: Console, rule: dict) -> None:
    limits = ", ".join(f"{a}: {g:.2f}" for a, g in sorted(rule["grid_max_waste"].items())) or "none tuned"
    console.print(f"thd dispatch rule: grid while sequences x blocks of the longest sequence <= G x the token "
                  f"path's blocks, else token (CUKILN_ROPE_THD_DISPATCH overrides). G per arch: {limits}; "
                  f"other archs {rule['default']:.2f}.")
    for arch, t in sorted(rule["tuning"].items()):
        table = Table(title=f"thd tuning data, {arch}: {t['device']}, {t['date']}{copy_note(t)}",
                      title_justify="left")
        for col in ("tokens", "seqs", "skewed", "grid/token blocks", "token us", "token x copy", "grid us",
                    "grid x copy"):
            table.add_column(col, justify="right")
        for m in t["measurements"]:
            table.add_row(str(m["tokens"]), str(m["n_seqs"]), "yes" if m["skewed"] else "",
                          f"{m['grid_over_token_blocks']:.2f}", f"{m['token_us']:.1f}", ratio(m["token_x_copy"]),
                          f"{m['grid_us']:.1f}", ratio(m["grid_x_copy"]))
        console.print(table)
