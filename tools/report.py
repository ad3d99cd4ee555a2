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

from . import hooks

from cukiln.codegen.ops import FAMILIES, family_of_op, tuned_kernels, tuned_settings
from cukiln.core import artifacts
from cukiln.core.archs import DEFAULT_ARCHS, target_arch, tuned_source

_SORT_KEYS = {
    "name": lambda row: row["name"],
    "registers": lambda row: -row["registers"],
    "spills": lambda row: -row["spill_bytes"],
    "smem": lambda row: -row["shared_bytes"],
    "size": lambda row: -row["cubin_bytes"],
    "compile": lambda row: -row["compile_seconds"],
}


def rows(manifest: dict, only: str | None, build_log: dict | None = None) -> list[dict]:
    """One row per (variant, arch): resources and the size of its module's cubin, and the module's compile
    time in the last build here (``build_log``, untracked; 0 when unknown)."""
    pattern = re.compile(only) if only else None
    seconds = (build_log or {}).get("compile_seconds", {})
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
                "cubin_bytes": cubin.get("bytes", 0),
                "compile_seconds": seconds.get(arch, {}).get(entry["module"], 0.0),
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


def copy_note(tuning: dict) -> str:
    """The same-run copy bandwidth for a table title ("" for tuning files that predate it)."""
    return f" — copy {tuning['copy_tbps']:.2f} TB/s" if tuning.get("copy_tbps") else ""


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def warnings(manifest: dict, tuning: dict, root: Path) -> list[dict]:
    """Everything that falls short, each as {"kind", "detail"}: spills, archs missing from the build or
    from a variant, tuning measured on machine code that changed since, cubins missing or not the ones built."""
    out = []
    for entry in manifest.get("variants", []):
        for arch, res in entry.get("resources", {}).items():
            if res is None:
                out.append({"kind": "missing arch", "detail": f"{entry['name']} has no {arch} cubin entry"})
            elif res["spill_store_bytes"] + res["spill_load_bytes"]:
                out.append({"kind": "spill", "detail": f"{entry['name']} on {arch}: "
                            f"{res['spill_store_bytes']} B stored, {res['spill_load_bytes']} B loaded"})
    for arch in DEFAULT_ARCHS:
        if manifest and arch not in manifest.get("archs", []):
            out.append({"kind": "missing arch", "detail": f"{arch} was not built (`cukiln build` builds every "
                                                          "default arch)"})
    tuned, settings = tuned_kernels(), tuned_settings()
    for arch, data in sorted(tuning.items()):
        for op, result in sorted(data.items()):
            if op not in tuned:
                continue
            recorded = result.get("fingerprint")
            now = artifacts.tuning_fingerprint(manifest, tuned[op], target_arch(arch), settings[op])
            if recorded != now:
                why = "records no fingerprint of the kernels it measured" if recorded is None else \
                    "was measured on kernel machine code or launch settings that have changed since"
                out.append({"kind": "stale tuning", "detail": f"{op} tuning for {arch} ({result.get('date', '?')}) "
                            f"{why}: rerun `cukiln tune {op}` on that GPU"})
    for name, module in sorted(manifest.get("modules", {}).items()):
        for arch, cubin in sorted(module.get("cubins", {}).items()):
            path = root / cubin["path"]
            if not path.exists():
                out.append({"kind": "missing cubin", "detail": f"{cubin['path']} (run `cukiln build`)"})
            elif _sha256(path) != cubin["sha256"]:
                out.append({"kind": "stale cubin", "detail": f"{cubin['path']} differs from the one the manifest "
                            "records (run `cukiln build`)"})
    return out


def collect(manifest: dict, tuning: dict, root: Path, only: str | None = None, sort: str = "name") -> dict:
    """The whole report as plain data (what --json prints); with ``only`` (a regex of variant names) every part
    of it holds the matching variants alone: their ops' summaries, rows and warnings, and the rules of the
    families they belong to. ValueError when ``only`` matches no variant."""
    if only:
        pattern = re.compile(only)
        matching = [e for e in manifest.get("variants", []) if pattern.search(e["name"])]
        if not matching:
            raise ValueError(f"--only {only!r} matches no variant")
        modules = {e["module"] for e in matching}
        manifest = {**manifest, "variants": matching,
                    "modules": {m: v for m, v in manifest.get("modules", {}).items() if m in modules}}
    families = {family_of_op(e["op"]).name for e in manifest.get("variants", [])}
    rules = {rule for f in FAMILIES if f.name in families for rule in f.tuned_kernels}
    tuning = {arch: {rule: r for rule, r in data.items() if rule in rules} for arch, data in tuning.items()}
    return {
        "nvrtc_version": manifest.get("nvrtc_version"), "archs": manifest.get("archs", []),
        "ops": op_summary(manifest), "tuning_tables": tuning_tables(tuning, this_gpu()),
        "variants": sorted(rows(manifest, None, artifacts.read_build_log(root)), key=_SORT_KEYS[sort]),
        "rules": {f.name: hooks.report_rules(f, tuning) for f in FAMILIES if f.tools and f.name in families},
        "warnings": warnings(manifest, tuning, root),
    }


def this_gpu() -> str | None:
    """The tuning target of the GPU this process sees (core.archs.tuning_target), or None without one."""
    try:
        from cukiln.loader import KERNELS

        return KERNELS.tuning_target(0)
    except Exception:  # no driver, no GPU
        return None


def tuning_tables(tuning: dict, gpu: str | None) -> dict:
    """Which GPUs and archs have tuned tables of each rule, and the one each rule takes on ``gpu`` (a tuning target:
    its own table, else its arch's, else the rule's default: core.archs.tuned)."""
    tables = {}
    for target, data in sorted(tuning.items()):
        for rule in data:
            tables.setdefault(rule, []).append(target)
    uses = {rule: tuned_source(dict.fromkeys(targets), gpu) or "default" for rule, targets in tables.items()}
    return {"tables": tables, "gpu": gpu, "gpu_uses": uses if gpu else {}}


def _print_tuning_tables(console: Console, t: dict) -> None:
    rows = "; ".join(f"{rule}: {', '.join(targets)}" for rule, targets in sorted(t["tables"].items())) or "none"
    console.print(f"tuned tables (per GPU, or per arch for every GPU of it without its own): {rows}")
    if t["gpu"]:
        uses = ", ".join(f"{rule} from {source}" for rule, source in sorted(t["gpu_uses"].items())) or "no tuned rule"
        console.print(f"this GPU ({t['gpu']}) takes: {uses}")


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


def main(args) -> int:
    console = args.console
    root = artifacts.generated_dir()
    manifest = artifacts.read_manifest(root)
    if not manifest:
        raise ValueError("no generated/manifest.json: run `cukiln build` first")
    report = collect(manifest, artifacts.read_tuning(root), root, args.only, args.sort)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    _print_ops(console, report["ops"])
    _print_variants(console, report["variants"], report["archs"], report["nvrtc_version"], args.limit)
    _print_tuning_tables(console, report["tuning_tables"])
    for f in FAMILIES:
        if f.name in report["rules"]:
            hooks.print_rules(f, console, report["rules"][f.name])
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
