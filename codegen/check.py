"""`cukiln build --check` and `--dispatch-only`: compare generated/ with what the sources produce, or refold the
tuning data into dispatch.py, without compiling anything."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from cukiln.core import artifacts

from . import emit
from .ops import all_variants
from .render import render_headers, render_modules


def check(out_dir: Path, console: Console) -> int:
    """0 when generated/ matches what the templates produce, else 1 with the differences listed."""
    variants = all_variants()
    expected = emit.expected_files(render_modules(variants), render_headers(), variants,
                                   artifacts.read_tuning(out_dir))
    problems = []
    for name, text in expected.items():
        path = out_dir / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text() != text:
            problems.append(f"{name}: differs from what the templates produce")
    want = [emit.static_variant_entry(v) for v in variants]
    have = emit.static_view(artifacts.read_manifest(out_dir))
    if want != have:
        missing = {e["name"] for e in want} - {e["name"] for e in have}
        extra = {e["name"] for e in have} - {e["name"] for e in want}
        detail = f"{len(missing)} variants missing, {len(extra)} unexpected" if missing or extra else "entries differ"
        problems.append(f"{artifacts.MANIFEST}: {detail}")
    stale = sorted(p.name for pattern in ("*.cu", "*.cuh") for p in out_dir.glob(pattern) if p.name not in expected)
    problems += [f"{name}: no longer produced by the templates" for name in stale]
    if problems:
        console.print("[red]generated/ is out of date[/red] — run `cukiln build`:")
        for p in problems:
            console.print(f"  • {p}")
        return 1
    console.print(f"[green]generated/ is up to date[/green] ({len(variants)} variants, {len(expected)} files)")
    return 0


def refold_dispatch(out_dir: Path, console: Console) -> int:
    """Rewrite dispatch.py alone from the variants and the tuning data (the kernels stay as built)."""
    tuning = artifacts.read_tuning(out_dir)
    changed = artifacts.write_text_if_changed(out_dir / artifacts.DISPATCH, emit.render_dispatch(all_variants(), tuning))
    console.print(f"{artifacts.DISPATCH}: {'rewritten' if changed else 'unchanged'} with the tuning of "
                  f"{', '.join(sorted(tuning)) or 'no arch'}")
    return 0
