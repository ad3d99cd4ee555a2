"""Which kernels two builds compiled to the same machine code: each kernel's .text bytes in the cubins of two
generated/ folders (two trees, or a tree before and after a change), module by module and arch by arch. A kernel
whose instructions did not change needs no A/B on a GPU; one that changed does.

    python benchmarks/same_kernels.py OLD/generated generated [--only REGEX]

No GPU needed. Both folders need their cubins (`cukiln build` in each tree).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cukiln.core.artifacts import CUBINS, kernel_texts


def compare(old: Path, new: Path, only: str | None) -> list[dict]:
    """A row per (arch, module) present in either folder: its kernels identical, changed, gone and new."""
    pattern = re.compile(only) if only else None
    rows = []
    paths = {p.relative_to(folder / CUBINS) for folder in (old, new) for p in (folder / CUBINS).glob("*/*.cubin")}
    for rel in sorted(paths):
        before, after = ({} if not (f / CUBINS / rel).exists() else kernel_texts((f / CUBINS / rel).read_bytes())
                         for f in (old, new))
        names = [n for n in sorted(set(before) | set(after)) if pattern is None or pattern.search(n)]
        if not names:
            continue
        rows.append({"arch": rel.parent.name, "module": rel.stem,
                     "identical": [n for n in names if n in before and before[n] == after.get(n)],
                     "changed": [n for n in names if n in before and n in after and before[n] != after[n]],
                     "gone": [n for n in names if n not in after], "new": [n for n in names if n not in before]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the generated/ folder before")
    parser.add_argument("new", type=Path, help="the generated/ folder after")
    parser.add_argument("--only", help="only kernels whose names match this regex")
    parser.add_argument("--names", action="store_true", help="also name every changed, gone and new kernel")
    args = parser.parse_args()
    rows = compare(args.old, args.new, args.only)
    if not rows:
        raise SystemExit("same_kernels.py: no cubins to compare (run `cukiln build` in both trees)")
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
