"""NVRTC compilation of one module for one architecture, and the ptxas resource report parser.

Uses ``cuda.bindings.nvrtc`` with the ``nvidia-cuda-nvrtc`` wheel: no GPU and no driver are needed.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass

# Front end and NVVM (C++ to PTX), then ptxas (PTX to the arch's SASS, -v: the resource report).
NVVM_OPTIONS = ("-std=c++17", "-default-device", "--extra-device-vectorization")
PTXAS_OPTIONS = ("-v",)
COMPILE_OPTIONS = NVVM_OPTIONS + tuple(f"-Xptxas={o}" for o in PTXAS_OPTIONS)


class CompileError(RuntimeError):
    """NVRTC rejected a module: carries the module, the arch, the variants and the log."""

    def __init__(self, module: str, arch: str, log: str, variants: list[str]):
        self.module, self.arch, self.log, self.variants = module, arch, log, variants
        shown = ", ".join(variants[:4]) + (f" (+{len(variants) - 4} more)" if len(variants) > 4 else "")
        super().__init__(f"NVRTC failed to compile module {module} for {arch} (variants: {shown}):\n{log}")

    def __reduce__(self):  # raised in build workers: must cross the process boundary intact
        return (CompileError, (self.module, self.arch, self.log, self.variants))


@dataclass(frozen=True)
class Resources:
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _check(result, what: str) -> None:
    from cuda.bindings import nvrtc

    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what} failed: {result!r}")


def compile_cubin(source: str, name: str, arch: str, headers: dict[str, str]) -> tuple[bytes, str, float]:
    """Compile ``source`` for ``arch`` (e.g. "sm_90") in one NVRTC call. Returns (cubin, ptxas/NVRTC log,
    seconds). Raises CompileError with the log when NVRTC rejects the source."""
    return _nvrtc(source, name, arch, COMPILE_OPTIONS, headers, cubin=True)


def compile_ptx(source: str, name: str, target: str, headers: dict[str, str]) -> tuple[bytes, str, float]:
    """Compile ``source`` to PTX for virtual arch ``target`` (e.g. "compute_80"): the front end and NVVM,
    the larger part of a compile, which several archs' cubins can then share (assemble_cubin)."""
    return _nvrtc(source, name, target, NVVM_OPTIONS, headers, cubin=False)


def _nvrtc(source: str, name: str, arch: str, options: tuple[str, ...], headers: dict[str, str],
           cubin: bool) -> tuple[bytes, str, float]:
    from cuda.bindings import nvrtc

    header_names = [n.encode() for n in headers]
    header_sources = [s.encode() for s in headers.values()]
    err, prog = nvrtc.nvrtcCreateProgram(
        source.encode(), f"{name}.cu".encode(), len(headers), header_sources, header_names
    )
    _check(err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode()] + [o.encode() for o in options]
        start = time.perf_counter()
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        seconds = time.perf_counter() - start
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check(err, "nvrtcGetProgramLogSize")
        log_buf = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, log_buf)[0], "nvrtcGetProgramLog")
        log = log_buf.rstrip(b"\x00 ").decode(errors="replace")
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(name, arch, log, [])
        get_size, get = (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if cubin else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
        err, size = get_size(prog)
        _check(err, get_size.__name__)
        out = b" " * size
        _check(get(prog, out)[0], get.__name__)
        return out, log, seconds
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@functools.lru_cache(maxsize=None)
def ptxas() -> tuple[str, str] | None:
    """(path, version such as "13.5") of the ptxas executable that the nvidia-cuda-nvcc wheel (or a CUDA
    toolkit) provides, or None when there is none."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        path = find_nvidia_binary_utility("ptxas")
        if path is None:
            return None
        out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    except Exception:  # not installed, not runnable: the build compiles each arch with NVRTC alone
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return (path, m.group(1)) if m else None


def assemble_cubin(ptx: bytes, name: str, arch: str) -> tuple[bytes, str, float]:
    """PTX from compile_ptx to ``arch``'s cubin with the ptxas executable: the same whole-program
    assembly that NVRTC runs inside (the kernels come out identical). Returns (cubin, log, seconds);
    CompileError with the log on failure."""
    found = ptxas()
    if found is None:
        raise RuntimeError("ptxas not found: install nvidia-cuda-nvcc (a dependency of cukiln)")
    with tempfile.TemporaryDirectory(prefix="cukiln-ptxas-") as tmp:
        src, out = os.path.join(tmp, f"{name}.ptx"), os.path.join(tmp, f"{name}.cubin")
        with open(src, "wb") as f:
            f.write(ptx.rstrip(b"\x00"))
        start = time.perf_counter()
        run = subprocess.run([found[0], f"-arch={arch}", *PTXAS_OPTIONS, src, "-o", out],
                             capture_output=True, text=True)
        seconds = time.perf_counter() - start
        log = (run.stdout + run.stderr).strip()
        if run.returncode != 0:
            raise CompileError(name, arch, log, [])
        with open(out, "rb") as f:
            return f.read(), log, seconds


_FUNC_RE = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_STACK_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """Per entry function: registers, shared memory, stack and spill bytes, from ``-Xptxas=-v`` output."""
    out: dict[str, Resources] = {}
    current: str | None = None
    fields: dict[str, int] = {}

    def flush() -> None:
        if current is not None:
            out[current] = Resources(
                registers=fields.get("registers", 0),
                shared_bytes=fields.get("smem", 0),
                stack_bytes=fields.get("stack", 0),
                spill_store_bytes=fields.get("spill_stores", 0),
                spill_load_bytes=fields.get("spill_loads", 0),
            )

    for line in log.splitlines():
        m = _FUNC_RE.search(line)
        if m:
            flush()
            current, fields = m.group(1), {}
            continue
        if current is None:
            continue
        m = _STACK_RE.search(line)
        if m:
            fields["stack"], fields["spill_stores"], fields["spill_loads"] = map(int, m.groups())
        m = _REGS_RE.search(line)
        if m:
            fields["registers"] = int(m.group(1))
            m2 = _SMEM_RE.search(line)
            if m2:
                fields["smem"] = int(m2.group(1))
    flush()
    return out
