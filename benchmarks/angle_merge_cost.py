"""What RoPE's angle-source axis costs the build, and what one kernel taking the source as a run-time argument would
cost instead: a study for the build-time target, before anyone changes the template.

The build compiles one kernel per angle source (freqs, cos|sin in q's type, cos|sin in fp32, inv_freq, base) for RoPE's
16-byte kernels (the narrower ones already take any source). This script compiles each module's kernels given two ways:
  * as `cukiln build` renders it, a kernel per source;
  * one kernel per combination of the other axes, whose angle source is a run-time field (``kind``) of a params struct
    holding every source's fields, through an ``AnyAngles`` source that switches to the sources' own code
    (fill_angles' overload below);
and gives each compile's seconds (NVVM, then ptxas for the arch), the most registers a kernel takes and the spills.

    python benchmarks/angle_merge_cost.py rope_bf16 [rope_fp32_thd_grid ...] [--only REGEX] [--out cost.json]

No GPU needed; nothing cached. The merged kernel is not run: its speed is a question for the GPU.
"""

from __future__ import annotations

import argparse
import json
import re

from cukiln.codegen.compile import ptx_target
from cukiln.codegen.nvrtc import assemble_cubin, compile_ptx, nvrtc_version, parse_ptxas_log
from cukiln.codegen.jinja import macros
from cukiln.codegen.ops import all_variants
from cukiln.codegen.render import render_headers, render_modules
from cukiln.codegen.rope_abi import ANGLE_FIELDS
from cukiln.codegen.rope_variants import SOURCES, Angles

# The build's own pieces of a kernel that takes its source at run time (kv_append's and decode_step's, angles=any):
# its params fields and the AnyAngles a kernel builds from p (AnyAngles and its fill_angles are rope.cuh's).
ANY_FIELDS = "".join(f"  {ctype} {name};\n" for ctype, name in ANGLE_FIELDS[Angles.ANY])


def _any_angles(dtype_ctype: str) -> str:
    """The AnyAngles a kernel builds from its params p (angles.j2's angle_source, as kv_append.cu renders it)."""
    return str(macros("angles.j2").angle_source(Angles.ANY.value, dtype_ctype, [a.value for a in SOURCES]))


def _groups(module: str, only: str) -> list[list]:
    """The module's variants (those matching ``only``) in groups that differ in their angle source alone."""
    groups: dict[str, list] = {}
    for v in all_variants():
        if v.module == module and re.search(only, v.name):
            groups.setdefault(v.name.replace(f"_{v.angles.value}_", "_*_"), []).append(v)
    if not groups:
        raise SystemExit(f"angle_merge_cost.py: no variant of {module!r} matches {only!r}")
    if any(all(v.angles.value != "freqs" for v in g) for g in groups.values()):
        raise SystemExit("angle_merge_cost.py: a group without a freqs variant")
    return list(groups.values())


def _merged_source(freqs_source: str, names: list[str], dtype_ctype: str) -> str:
    """The module as rendered for its freqs variants (``names``), each kernel turned into one that takes its angle
    source at run time (a params struct with every source's fields: the freqs struct's shared fields, then ANY_FIELDS)."""
    first = min(freqs_source.index("// " + n + ":") for n in names)
    head, body = freqs_source[:first], freqs_source[first:]
    src = _any_angles(dtype_ctype)
    structs = {}
    for struct in sorted(set(re.findall(r"\(const (params_\w+) p\)", body))):
        shared = re.search(r"struct " + struct + r" \{\n(.*?)  const void\* table;", head, re.S).group(1)
        structs[struct] = f"struct {struct}_any {{\n{shared}{ANY_FIELDS}}};\n"
    body = re.sub(r"\(const (params_\w+) p\)", r"(const \1_any p)", body)
    body = re.sub(r"FreqsTable\{[^}]*\}\)", lambda m: src + ")", body)
    return head + "".join(structs.values()) + body


def _compile(source: str, module: str, arch: str, headers: dict[str, str]) -> dict:
    ptx, _, nvvm = compile_ptx(source, module, ptx_target(arch), headers)
    _, log, ptxas = assemble_cubin(ptx, module, arch)
    kernels = parse_ptxas_log(log).values()
    return {"kernels": len(kernels), "nvvm_s": round(nvvm, 2), "ptxas_s": round(ptxas, 2),
            "max_registers": max(k.registers for k in kernels),
            "spilling_kernels": sum(1 for k in kernels if k.spill_store_bytes + k.spill_load_bytes),
            "most_spilled_bytes": max(k.spill_store_bytes + k.spill_load_bytes for k in kernels)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="rope modules of the build without M-RoPE, e.g. rope_bf16")
    parser.add_argument("--only", default="", help="only the variants whose names match this regex")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()
    headers = render_headers()
    rows = []
    for module in args.modules:
        groups = _groups(module, args.only)
        every = [v for g in groups for v in g]
        freqs = [v for g in groups for v in g if v.angles.value == "freqs"]
        ctype = {"bf16": "bf16", "fp16": "f16", "fp32": "float"}[every[0].dtype.value]
        per_source = render_modules(every)[module]
        merged = _merged_source(render_modules(freqs)[module], [v.name for v in freqs], ctype)
        row = {"module": module, "only": args.only, "groups": len(groups),
               "kernels per source": _compile(per_source, module, args.arch, headers),
               "one kernel, source at run time": _compile(merged, module, args.arch, headers)}
        rows.append(row)
        for label in ("kernels per source", "one kernel, source at run time"):
            r = row[label]
            print(f"{module} {label:<31} {r['kernels']:4d} kernels  NVVM {r['nvvm_s']:6.2f} s  ptxas {r['ptxas_s']:6.2f} s"
                  f"  max {r['max_registers']} registers, {r['spilling_kernels']} spilling (at most "
                  f"{r['most_spilled_bytes']} B)", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"arch": args.arch, "nvrtc": nvrtc_version(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
