"""`cukiln report` (no GPU): the variants per op and axis, their resources per arch, the dispatch rules in
force with the tuning data behind them, and everything that falls short (spills, missing archs, stale
tuning, missing or out-of-date cubins).

``collect()`` gathers all of it as plain data; the text view and ``--json`` both print that.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cukiln.codegen import emit

_SORT_KEYS = {
    "name": lambda row: row["name"],
    "registers": lambda row: -row["registers"],
    "spills": lambda row: -row["spill_bytes"],
    "smem": lambda row: -row["shared_bytes"],
    "size": lambda row: -row["cubin_bytes"],
    "compile": lambda row: -row["compile_seconds"],
}
# Archs a default build targets (a GPU's own arch comes on top): missing ones are reported.
EXPECTED_ARCHS = ("sm_80", "sm_90")


def rows(manifest: dict, only: str | None) -> list[dict]:
    """One row per (variant, arch): resources and the size and compile time of its module's cubin."""
    pattern = re.compile(only) if only else None
    out = []
    for entry in manifest.get("variants", []):
        if pattern and not pattern.search(entry["name"]):
            continue
        for arch, res in entry.get("resources", {}).items():
            cubin = manifest["modules"][entry["module"]]["cubins"].get(arch, {})
            out.append({
                "name": entry["name"], "op": entry.get("op", ""), "arch": arch, "module": entry["module"],
                "registers": res["registers"] if res else -1,
                "shared_bytes": res["shared_bytes"] if res else 0,
                "stack_bytes": res["stack_bytes"] if res else 0,
                "spill_bytes": res["spill_store_bytes"] + res["spill_load_bytes"] if res else 0,
                "cubin_bytes": cubin.get("bytes", 0), "compile_seconds": cubin.get("compile_seconds", 0.0),
            })
    return out


def op_summary(manifest: dict) -> dict:
    """Per op: variant count, modules, the count of each value of each axis, and per arch the variants
    with resources, the worst registers and shared memory, and the spilling variants."""
    ops: dict[str, dict] = {}
    for entry in manifest.get("variants", []):
        op = ops.setdefault(entry.get("op", "?"), {"variants": 0, "modules": set(), "axes": {}, "archs": {}})
        op["variants"] += 1
        op["modules"].add(entry["module"])
        for axis, value in entry.get("axes", {}).items():
            op["axes"].setdefault(axis, Counter())[str(value)] += 1
        for arch, res in entry.get("resources", {}).items():
            a = op["archs"].setdefault(arch, {"variants": 0, "max_registers": 0, "max_shared_bytes": 0, "spilling": 0})
            if res:
                a["variants"] += 1
                a["max_registers"] = max(a["max_registers"], res["registers"])
                a["max_shared_bytes"] = max(a["max_shared_bytes"], res["shared_bytes"])
                a["spilling"] += bool(res["spill_store_bytes"] + res["spill_load_bytes"])
    return {name: {**op, "modules": len(op["modules"]), "axes": {k: dict(sorted(c.items())) for k, c in op["axes"].items()}}
            for name, op in sorted(ops.items())}


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


def decode_rule(tuning: dict) -> dict:
    """The split-KV rule in force per arch and, per tuned point, the best (pipeline, split count), the
    rule's choice and what the choice costs against the best (the runner-up's margin when the rule picks
    the best)."""
    from cukiln.generated import dispatch

    from .decode import measured_choice, measured_times

    data = {}
    for arch, t in sorted(tuning.items()):
        t = t.get("decode")
        if not t:
            continue
        rule = dispatch.DECODE_SPLIT.get(arch, dispatch.DECODE_SPLIT_DEFAULT)
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
        data[arch] = {"device": t["device"], "date": t["date"], "sms": t["sms"], "rule": t["rule"],
                      "copy_tbps": t.get("copy_tbps"), "points": points}
    return {"rules": dict(dispatch.DECODE_SPLIT), "default": dict(dispatch.DECODE_SPLIT_DEFAULT), "tuning": data}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def warnings(manifest: dict, tuning: dict, root: Path) -> list[dict]:
    """Everything that falls short, each as {"kind", "detail"}: spills, archs missing from the build or
    from a variant, tuning measured on sources that changed since, cubins missing or not the ones built."""
    out = []
    for entry in manifest.get("variants", []):
        for arch, res in entry.get("resources", {}).items():
            if res is None:
                out.append({"kind": "missing arch", "detail": f"{entry['name']} has no {arch} cubin entry"})
            elif res["spill_store_bytes"] + res["spill_load_bytes"]:
                out.append({"kind": "spill", "detail": f"{entry['name']} on {arch}: "
                            f"{res['spill_store_bytes']} B stored, {res['spill_load_bytes']} B loaded"})
    for arch in EXPECTED_ARCHS:
        if manifest and arch not in manifest.get("archs", []):
            out.append({"kind": "missing arch", "detail": f"{arch} was not built (`cukiln build --arch {arch}`)"})
    for arch, data in sorted(tuning.items()):
        for op, result in sorted(data.items()):
            if op not in emit.TUNED_MODULES:
                continue
            recorded, now = result.get("fingerprint"), emit.tuning_fingerprint(manifest, op)
            if recorded != now:
                why = "records no fingerprint of the sources it measured" if recorded is None else \
                    "was measured on kernel sources that have changed since"
                out.append({"kind": "stale tuning", "detail": f"{op} tuning for {arch} ({result.get('date', '?')}) "
                            f"{why}: rerun `cukiln tune {op}` on that GPU"})
    for name, module in sorted(manifest.get("modules", {}).items()):
        for arch, cubin in sorted(module.get("cubins", {}).items()):
            path = root / cubin["path"]
            if not path.exists():
                out.append({"kind": "missing cubin", "detail": f"{cubin['path']} (run `cukiln build --arch {arch}`)"})
            elif _sha256(path) != cubin["sha256"]:
                out.append({"kind": "stale cubin", "detail": f"{cubin['path']} differs from the one the manifest "
                            "records (run `cukiln build`)"})
    return out


def collect(manifest: dict, tuning: dict, root: Path, only: str | None = None, sort: str = "name") -> dict:
    """The whole report as plain data (what --json prints)."""
    return {
        "nvrtc_version": manifest.get("nvrtc_version"), "archs": manifest.get("archs", []),
        "ops": op_summary(manifest),
        "variants": sorted(rows(manifest, only), key=_SORT_KEYS[sort]),
        "rules": {"rope_launch": launch_rule(tuning), "rope_thd": thd_rule(tuning),
                  "decode_split": decode_rule(tuning)},
        "warnings": warnings(manifest, tuning, root),
    }


def _print_ops(console: Console, ops: dict) -> None:
    table = Table(title="variants per op and arch", title_justify="left")
    for col in ("op", "variants", "modules", "arch", "with resources", "max registers", "max smem B", "spilling"):
        table.add_column(col, justify="left" if col in ("op", "arch") else "right")
    for name, op in ops.items():
        for i, (arch, a) in enumerate(sorted(op["archs"].items())):
            table.add_row(name if i == 0 else "", str(op["variants"]) if i == 0 else "",
                          str(op["modules"]) if i == 0 else "", arch, str(a["variants"]), str(a["max_registers"]),
                          str(a["max_shared_bytes"]), f"[red]{a['spilling']}[/red]" if a["spilling"] else "0")
    console.print(table)
    axes = Table(title="variants per axis value", title_justify="left")
    axes.add_column("op")
    axes.add_column("axis")
    axes.add_column("values (variants)")
    for name, op in ops.items():
        for i, (axis, counts) in enumerate(op["axes"].items()):
            axes.add_row(name if i == 0 else "", axis, ", ".join(f"{v} ({n})" for v, n in counts.items()))
    console.print(axes)


def _print_variants(console: Console, rows_: list[dict], archs: list[str], nvrtc: str, limit: int) -> None:
    shown = rows_ if limit <= 0 else rows_[:limit]
    table = Table(title=f"{len({r['name'] for r in rows_})} variants, archs {', '.join(archs)}, NVRTC {nvrtc}",
                  title_justify="left")
    table.add_column("variant", no_wrap=True)
    table.add_column("arch")
    for col in ("registers", "smem B", "stack B", "spill B", "module cubin KB", "module compile s"):
        table.add_column(col, justify="right")
    for r in shown:
        spill = f"[red]{r['spill_bytes']}[/red]" if r["spill_bytes"] else "0"
        table.add_row(r["name"], r["arch"], str(r["registers"]), str(r["shared_bytes"]), str(r["stack_bytes"]),
                      spill, f"{r['cubin_bytes'] / 1024:.0f}", f"{r['compile_seconds']:.1f}")
    console.print(table)
    if len(shown) < len(rows_):
        console.print(f"({len(rows_) - len(shown)} more rows: narrow with --only REGEX, or --limit 0 for all)")


def _print_launch_rule(console: Console, rule: dict) -> None:
    def describe(r: dict) -> str:
        return (f"vectors <= {r['max_vector_bytes']} B, {'stride-free' if r['packed_kernel'] else 'strided'} kernel "
                f"for packed tensors, {r['min_threads']}-{r['max_threads']} threads/block")

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


def _copy_note(tuning: dict) -> str:
    """The same-run copy bandwidth for a table title ("" for tuning files that predate it)."""
    return f" — copy {tuning['copy_tbps']:.2f} TB/s" if tuning.get("copy_tbps") else ""


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_thd_rule(console: Console, rule: dict) -> None:
    limits = ", ".join(f"{a}: {g:.2f}" for a, g in sorted(rule["grid_max_waste"].items())) or "none tuned"
    console.print(f"thd dispatch rule: grid while sequences x blocks of the longest sequence <= G x the token "
                  f"path's blocks, else token (CUKILN_ROPE_THD_DISPATCH overrides). G per arch: {limits}; "
                  f"other archs {rule['default']:.2f}.")
    for arch, t in sorted(rule["tuning"].items()):
        table = Table(title=f"thd tuning data, {arch}: {t['device']}, {t['date']}{_copy_note(t)}",
                      title_justify="left")
        for col in ("tokens", "seqs", "skewed", "grid/token blocks", "token us", "token x copy", "grid us",
                    "grid x copy"):
            table.add_column(col, justify="right")
        for m in t["measurements"]:
            table.add_row(str(m["tokens"]), str(m["n_seqs"]), "yes" if m["skewed"] else "",
                          f"{m['grid_over_token_blocks']:.2f}", f"{m['token_us']:.1f}", _ratio(m["token_x_copy"]),
                          f"{m['grid_us']:.1f}", _ratio(m["grid_x_copy"]))
        console.print(table)


def _print_decode_rule(console: Console, rule: dict) -> None:
    def describe(r: dict) -> str:
        if "table" in r:
            from .decode import TIE

            return (f"a K/V pipeline and the least split count within {TIE:.0%} of the fastest, measured at "
                    f"{len(r['table'])} points")
        return (f"the wave rule with <= {r['blocks_per_sm']} blocks/SM, >= {r['min_keys_per_split']} keys, "
                f"wave efficiency {r['wave_efficiency']}")

    tuned = ", ".join(f"{a}: {describe(r)}" for a, r in sorted(rule["rules"].items())) or "none tuned"
    console.print("decode split rule (num_splits= overrides): where tuned, the nearest measured (rows x KV "
                  "heads, T) point's K/V pipeline (another than the narrow one only where it beats it beyond the "
                  "tie margin and the call has a variant of it) and that pipeline's total of blocks (the least split count within "
                  "the tie margin of the fastest), shared out over the call's blocks; elsewhere the "
                  "least split count (whole 64-key tiles a split) whose waves of blocks reach wave_efficiency "
                  "of the best count's, with at most blocks_per_sm resident blocks per multiprocessor and at "
                  f"least min_keys_per_split keys per split. Per arch: {tuned}; other archs "
                  f"{describe(rule['default'])}.")
    for arch, t in sorted(rule["tuning"].items()):
        table = Table(title=f"decode tuning data, {arch}: {t['device']} ({t['sms']} SMs), {t['date']}"
                            f"{_copy_note(t)}", title_justify="left")
        for col in ("b", "T", "best pipeline x splits", "best us", "best TB/s", "x copy", "rule's pipeline x splits",
                    "rule / best", "runner-up / best"):
            table.add_column(col, justify="right")
        for p in t["points"]:
            loss = p["chosen_over_best"]
            table.add_row(str(p["batch"]), str(p["T"]), f"{p['best_pipeline']} x {p['best_splits']}",
                          f"{p['best_us']:.1f}", f"{p['best_tbps']:.2f}" if p["best_tbps"] else "-",
                          _ratio(p["best_x_copy"]), f"{p['chosen_pipeline']} x {p['chosen_splits']}", f"[{'red' if loss > 1.03 else 'green'}]{loss:.3f}[/]",
                          f"{p['runner_up_over_best']:.3f}" if p["runner_up_over_best"] else "-")
        console.print(table)


def main(args) -> int:
    console = Console()
    root = emit.generated_dir()
    manifest = emit.read_manifest()
    if not manifest:
        console.print("[red]no generated/manifest.json: run `cukiln build` first[/red]")
        return 1
    report = collect(manifest, emit.read_tuning(), root, args.only, args.sort)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    _print_ops(console, report["ops"])
    _print_variants(console, report["variants"], report["archs"], report["nvrtc_version"], args.limit)
    _print_launch_rule(console, report["rules"]["rope_launch"])
    _print_thd_rule(console, report["rules"]["rope_thd"])
    _print_decode_rule(console, report["rules"]["decode_split"])
    problems = report["warnings"]
    if problems:
        console.print(f"[yellow]{len(problems)} warnings[/yellow]")
        for kind, count in Counter(w["kind"] for w in problems).items():
            items = [w["detail"] for w in problems if w["kind"] == kind]
            console.print(f"  [yellow]{kind}[/yellow] ({count}): " + "; ".join(items[:5])
                          + (f"; and {count - 5} more" if count > 5 else ""))
    else:
        console.print("[green]no warnings[/green]: no spills, every expected arch built, tuning current, cubins in place")
    return 0
