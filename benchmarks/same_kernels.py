"""Which kernels two builds compiled to the same machine code, module by module and arch by arch: each kernel's .text
bytes in the cubins of two generated/ folders (two trees, or a tree before and after a change), or each kernel's hash of
them in two manifests (schema 3 on: no build needed, e.g. the committed one of another commit). A kernel whose
instructions did not change needs no A/B on a GPU; one that changed does.

    python benchmarks/same_kernels.py OLD/generated generated [--only REGEX]
    git show REV:generated/manifest.json > old.json
    python benchmarks/same_kernels.py old.json generated/manifest.json

No GPU needed. A folder needs its cubins (`cukiln build` there); a manifest describes the cubins its build made.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

from cukiln.core.artifacts import CUBINS, kernel_texts


def machine_code(source: Path) -> dict[tuple[str, str], dict[str, str]]:
    """(arch, module) -> kernel -> the sha256 of its machine code, from a manifest file (each variant's text_sha256) or
    from a generated/ folder's cubins."""
    if source.is_file():
        manifest = json.loads(source.read_text())
        if manifest.get("schema", 0) < 3:
            raise SystemExit(f"same_kernels.py: {source} records no kernel's machine code (manifest schema "
                             f"{manifest.get('schema')}; 3 on does): compare the cubins of a build of that tree")
        code: dict[tuple[str, str], dict[str, str]] = {}
        for entry in manifest.get("variants", []):
            for arch, res in (entry.get("resources") or {}).items():
                if res:
                    code.setdefault((arch, entry["module"]), {})[entry["name"]] = res["text_sha256"]
        return code
    return {(p.parent.name, p.stem): {k: hashlib.sha256(t).hexdigest() for k, t in kernel_texts(p.read_bytes()).items()}
            for p in (source / CUBINS).glob("*/*.cubin")}


def compare(old: Path, new: Path, only: str | None) -> list[dict]:
    """A row per (arch, module) present in either source: its kernels identical, changed, gone and new."""
    pattern = re.compile(only) if only else None
    before_all, after_all = machine_code(old), machine_code(new)
    rows = []
    for arch, module in sorted(before_all.keys() | after_all.keys()):
        before, after = before_all.get((arch, module), {}), after_all.get((arch, module), {})
        names = [n for n in sorted(set(before) | set(after)) if pattern is None or pattern.search(n)]
        if not names:
            continue
        rows.append({"arch": arch, "module": module,
                     "identical": [n for n in names if n in before and before[n] == after.get(n)],
                     "changed": [n for n in names if n in before and n in after and before[n] != after[n]],
                     "gone": [n for n in names if n not in after], "new": [n for n in names if n not in before]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the generated/ folder, or a manifest.json, before")
    parser.add_argument("new", type=Path, help="the generated/ folder, or a manifest.json, after")
    parser.add_argument("--only", help="only kernels whose names match this regex")
    parser.add_argument("--names", action="store_true", help="also name every changed, gone and new kernel")
    args = parser.parse_args()
    rows = compare(args.old, args.new, args.only)
    if not rows:
        raise SystemExit("same_kernels.py: no kernels to compare (a folder needs its cubins: `cukiln build` there)")
    print(f"{'arch':<7} {'module':<28} {'identical':>9} {'changed':>8} {'gone':>5} {'new':>5}")
    for r in rows:
        print(f"{r['arch']:<7} {r['module']:<28} {len(r['identical']):>9} {len(r['changed']):>8} {len(r['gone']):>5} "
              f"{len(r['new']):>5}")
        if args.names:
            for kind in ("changed", "gone", "new"):
                for name in r[kind]:
                    print(f"    {kind}: {name}")


if __name__ == "__main__":
    main()
