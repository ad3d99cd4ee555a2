"""Where a module's compile time goes: the module rendered with only the variants whose names match each pattern,
compiled to PTX (NVRTC's front end and NVVM) and assembled for one arch (ptxas), each timed. What a build would save
by dropping an axis value, or by making it a run-time argument, before anyone writes the change.

    python benchmarks/build_cost.py decode_bf16 '_v8$' '_v(2|4)$' --out cost.json

No GPU needed; nothing is cached (each subset is compiled afresh). Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import re

from cukiln.codegen.compile import ptx_target
from cukiln.codegen.nvrtc import assemble_cubin, compile_ptx, nvrtc_version
from cukiln.codegen.ops import all_variants
from cukiln.codegen.render import render_headers, render_modules


def cost(module: str, pattern: str | None, arch: str, headers: dict[str, str]) -> dict:
    """Seconds to compile ``module`` holding only the variants matching ``pattern`` (None: all of them)."""
    variants = [v for v in all_variants() if v.module == module and (pattern is None or re.search(pattern, v.name))]
    if not variants:
        raise SystemExit(f"build_cost.py: no variant of module {module!r} matches {pattern!r}")
    source = render_modules(variants)[module]
    ptx, _, nvvm = compile_ptx(source, module, ptx_target(arch), headers)
    _, _, ptxas = assemble_cubin(ptx, module, arch)
    return {"pattern": pattern, "variants": len(variants), "ptx_bytes": len(ptx), "nvvm_s": round(nvvm, 2),
            "ptxas_s": round(ptxas, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a module of the build, e.g. decode_bf16 (generated/<module>.cu)")
    parser.add_argument("patterns", nargs="*", help="regexes over variant names; each subset is timed on its own")
    parser.add_argument("--arch", default="sm_90", help="the arch ptxas assembles for (default sm_90)")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    headers = render_headers()
    rows = []
    for pattern in [None, *args.patterns]:
        row = cost(args.module, pattern, args.arch, headers)
        rows.append(row)
        print(f"{args.module} {pattern or '(all)':<24} {row['variants']:>4} variants  NVVM {row['nvvm_s']:6.1f} s  "
              f"ptxas {row['ptxas_s']:6.1f} s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"module": args.module, "arch": args.arch, "nvrtc": nvrtc_version(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
