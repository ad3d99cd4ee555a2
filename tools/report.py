"""`cukiln report` (no GPU): every variant with its resources, per arch, from generated/manifest.json."""

from __future__ import annotations

import json
import re

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
                "name": entry["name"], "arch": arch, "module": entry["module"],
                "registers": res["registers"] if res else -1,
                "shared_bytes": res["shared_bytes"] if res else 0,
                "stack_bytes": res["stack_bytes"] if res else 0,
                "spill_bytes": res["spill_store_bytes"] + res["spill_load_bytes"] if res else 0,
                "cubin_bytes": cubin.get("bytes", 0), "compile_seconds": cubin.get("compile_seconds", 0.0),
            })
    return out


def thd_rule() -> dict:
    """The token/grid rule in force (from dispatch.py) and the tuning data behind it, per arch."""
    from cukiln.generated import dispatch

    data = {}
    for arch, tuning in emit.read_tuning().items():
        t = tuning.get("rope-thd")
        if t:
            data[arch] = {"device": t["device"], "date": t["date"], "rule": t["rule"],
                          "measurements": [{"tokens": m["lengths"]["tokens"], "n_seqs": m["lengths"]["n_seqs"],
                                            "skewed": m.get("skewed", False),
                                            "grid_over_token_blocks": m["grid"]["blocks"] / m["token"]["blocks"],
                                            "token_us": m["token"]["ms"] * 1e3, "grid_us": m["grid"]["ms"] * 1e3}
                                           for m in t["measurements"]]}
    return {"grid_max_waste": dict(dispatch.ROPE_THD_GRID_MAX_WASTE),
            "default": dispatch.ROPE_THD_GRID_MAX_WASTE_DEFAULT, "tuning": data}


def _print_thd_rule(console: Console, rule: dict) -> None:
    limits = ", ".join(f"{a}: {g:.2f}" for a, g in sorted(rule["grid_max_waste"].items())) or "none tuned"
    console.print(f"thd dispatch rule: grid while sequences x blocks of the longest sequence <= G x the token "
                  f"path's blocks, else token (CUKILN_ROPE_THD_DISPATCH overrides). G per arch: {limits}; "
                  f"other archs {rule['default']:.2f}.")
    for arch, t in sorted(rule["tuning"].items()):
        table = Table(title=f"thd tuning data, {arch}: {t['device']}, {t['date']}", title_justify="left")
        for col in ("tokens", "seqs", "skewed", "grid/token blocks", "token us", "grid us"):
            table.add_column(col, justify="right")
        for m in t["measurements"]:
            table.add_row(str(m["tokens"]), str(m["n_seqs"]), "yes" if m["skewed"] else "",
                          f"{m['grid_over_token_blocks']:.2f}", f"{m['token_us']:.1f}", f"{m['grid_us']:.1f}")
        console.print(table)


def main(args) -> int:
    console = Console()
    manifest = emit.read_manifest()
    if not manifest:
        console.print("[red]no generated/manifest.json: run `cukiln build` first[/red]")
        return 1
    table_rows = sorted(rows(manifest, args.only), key=_SORT_KEYS[args.sort])
    if args.json:
        print(json.dumps({"nvrtc_version": manifest["nvrtc_version"], "archs": manifest["archs"],
                          "variants": table_rows, "thd_rule": thd_rule()}, indent=1))
        return 0
    table = Table(title=f"{len({r['name'] for r in table_rows})} variants, archs {', '.join(manifest['archs'])}, "
                        f"NVRTC {manifest['nvrtc_version']}", title_justify="left")
    for col in ("variant", "arch", "registers", "smem B", "stack B", "spill B", "module cubin KB", "module compile s"):
        table.add_column(col, justify="left" if col in ("variant", "arch") else "right")
    for r in table_rows:
        spill = f"[red]{r['spill_bytes']}[/red]" if r["spill_bytes"] else "0"
        table.add_row(r["name"], r["arch"], str(r["registers"]), str(r["shared_bytes"]), str(r["stack_bytes"]),
                      spill, f"{r['cubin_bytes'] / 1024:.0f}", f"{r['compile_seconds']:.1f}")
    console.print(table)
    _print_thd_rule(console, thd_rule())
    spilling = sorted({r["name"] for r in table_rows if r["spill_bytes"]})
    if spilling:
        console.print(f"[red]{len(spilling)} variants spill[/red]: {', '.join(spilling[:10])}")
    return 0
