"""One variant compiled alone, in seconds: its registers, spills and machine code (.text) hash for an arch, with the
templates as they are now and, with --against REV, with the headers a committed tree generated (REV's generated/*.cuh)
around this tree's module source, so that a template change can be seen to keep (or not) a kernel's machine code
before the full build (the .text hash is the manifest's text_sha256, cut to 16 digits; a kernel compiled alone gave
the build's hash for every kernel tried). The full build and `benchmarks/same_kernels.py` remain the record.

    python benchmarks/probe_variant.py decode_bf16_d128_s3_v8_ws_deep
    python benchmarks/probe_variant.py decode_bf16_d128_s3_v8_ws --against HEAD

No GPU needed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess

from cukiln.codegen import nvrtc, render
from cukiln.codegen.ops import family_of, parse_name
from cukiln.core.artifacts import kernel_texts


def compile_alone(name: str, headers: dict[str, str], arch: str) -> dict:
    """registers, spill bytes and the .text hash of variant ``name`` compiled in a module of its own."""
    v = parse_name(name)
    source = family_of(v).render_module(v.dtype, [v])
    cubin, log, seconds = nvrtc.compile_cubin(source, name, arch, headers)
    resources = nvrtc.parse_ptxas_log(log)[name]
    return {"registers": resources.registers, "spill_bytes": resources.spill_store_bytes,
            "text": hashlib.sha256(kernel_texts(cubin)[name]).hexdigest()[:16], "seconds": round(seconds, 1)}


def committed_headers(rev: str, now: dict[str, str]) -> dict[str, str]:
    """The headers of ``rev``'s generated/ (each header this tree renders, as ``rev`` committed it)."""
    return {name: subprocess.run(["git", "show", f"{rev}:generated/{name}"], check=True, capture_output=True,
                                 text=True).stdout for name in now}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+", help="variant names (the kernels' symbols)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--against", metavar="REV", help="also compile with REV's committed headers and compare")
    args = parser.parse_args()
    headers = render.render_headers()
    before = committed_headers(args.against, headers) if args.against else None
    for name in args.names:
        now = compile_alone(name, headers, args.arch)
        line = f"{name}: {now['registers']} registers, {now['spill_bytes']} spill bytes, text {now['text']}"
        if before is not None:
            then = compile_alone(name, before, args.arch)
            same = "same machine code" if then["text"] == now["text"] else "machine code changed"
            line += f"; at {args.against}: {then['registers']} registers, text {then['text']} ({same})"
        print(line)


if __name__ == "__main__":
    main()
