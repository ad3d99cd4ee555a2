"""A deliberately broken build: cubins whose kernels skip griddepcontrol.wait, to check that
tests/runtime/test_programmatic_launch_gpu.py catches a kernel touching memory before the kernel ahead
of it has finished.

    python benchmarks/studies/broken_wait_build.py DIR          # render + compile rope_bf16, rope_fp32, decode_bf16 for sm_90
    # on the GPU machine: the tests pass, then fail once DIR's cubins replace the build's
    python -m pytest -m gpu tests/runtime/test_programmatic_launch_gpu.py
    cp DIR/*.cubin generated/cubins/sm_90/ && python -m pytest -m gpu tests/runtime/test_programmatic_launch_gpu.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from cukiln.codegen import render
from cukiln.codegen.build import select_variants
from cukiln.codegen.nvrtc import compile_cubin

WAIT = 'asm volatile("griddepcontrol.wait;\\n" ::: "memory");'
MODULES = ("rope_bf16", "rope_fp32", "decode_bf16")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    headers = render.render_headers()
    assert WAIT in headers[render.COMMON_HEADER], "the wait is no longer where this script looks for it"
    headers[render.COMMON_HEADER] = headers[render.COMMON_HEADER].replace(WAIT, "")
    sources = render.render_modules(select_variants(None))
    for module in MODULES:
        cubin, _, seconds = compile_cubin(sources[module], module, "sm_90", headers)
        (out / f"{module}.cubin").write_bytes(cubin)
        print(f"{module}: {seconds:.1f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
