"""Compiling modules: NVRTC through the content-addressed cache, and archs that share one PTX.

Archs on the same side of every ``__CUDA_ARCH__`` test a module makes share one PTX: NVRTC's front end
and NVVM (two thirds of a compile) run once, then ptxas (from the nvidia-cuda-nvcc wheel) assembles
each arch's cubin, the same kernels NVRTC would have made. Without ptxas (or one older than NVRTC)
every arch is compiled by NVRTC on its own. Compile errors name the variants at the reported lines.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass

from cukiln.core.archs import arch_number

from . import cache
from .nvrtc import (COMPILE_OPTIONS, NVVM_OPTIONS, CompileError, assemble_cubin, compile_cubin, compile_ptx,
                    nvrtc_version, parse_ptxas_log, ptxas)
from .ops import symbol_pattern


@dataclass(frozen=True)
class CompileResult:
    module: str
    arch: str
    cubin: bytes
    resources: dict  # symbol -> Resources as a dict
    compile_seconds: float
    cached: bool
    ptx_target: str | None = None  # the shared PTX's virtual arch, None when NVRTC compiled the arch alone


_INCLUDE_RE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def included_headers(source: str, headers: dict[str, str]) -> dict[str, str]:
    """The headers ``source`` includes, directly or through other headers: what its cubin depends on."""
    found: dict[str, str] = {}
    pending = _INCLUDE_RE.findall(source)
    while pending:
        name = pending.pop()
        if name in headers and name not in found:
            found[name] = headers[name]
            pending += _INCLUDE_RE.findall(headers[name])
    return dict(sorted(found.items()))


def module_sha256(source: str, headers: dict[str, str]) -> str:
    """A hash of everything a module's kernels are made of: its source and every header it includes (the
    kernel bodies live in the headers), so that tuning measured on it goes stale when either changes."""
    h = hashlib.sha256(source.encode())
    for name, text in included_headers(source, headers).items():
        h.update(f"\0{name}\0".encode())
        h.update(text.encode())
    return h.hexdigest()


def compile_module(module: str, arch: str, source: str, headers: dict[str, str]) -> CompileResult:
    """Compile one module for one arch through the content-addressed cache (runs in a worker)."""
    entry, cached = _compile_cached(module, source, headers, compile_cubin, COMPILE_OPTIONS, arch)
    return _result(module, arch, entry, cached)


def _compile_cached(module: str, source: str, headers: dict[str, str], compile_fn, options: tuple[str, ...],
                    target: str) -> tuple[cache.CachedCubin, bool]:
    """compile_fn(source, module, target, headers) (NVRTC to a cubin or to PTX) through the cache: (entry,
    whether it was cached). The key covers only the headers the module includes, so editing one op's header
    leaves the other ops' entries cached."""
    headers = included_headers(source, headers)
    key = cache.cache_key(source, headers, options, target, nvrtc_version())

    def compile_now() -> cache.CachedCubin:
        out, log, seconds = _named_errors(module, source, lambda: compile_fn(source, module, target, headers))
        return cache.CachedCubin(out, log, round(seconds, 2))

    return _cached_or(key, compile_now)


def _named_errors(module: str, source: str, compile_fn):
    """compile_fn(), with a CompileError naming the variants at the reported error lines."""
    try:
        return compile_fn()
    except CompileError as e:
        raise CompileError(module, e.arch, e.log, variants_at_errors(module, source, e.log)) from None


def _cached_or(key: str, make) -> tuple[cache.CachedCubin, bool]:
    """The cache entry for ``key``, else make() stored under it; and whether it was cached."""
    entry = cache.load(key)
    if entry is not None:
        return entry, True
    with cache.entry_lock(key):
        entry = cache.load(key)  # another process may have compiled it while this one waited
        if entry is not None:
            return entry, True
        entry = make()
        cache.store(key, entry)
        return entry, False


def _result(module: str, arch: str, entry: cache.CachedCubin, cached: bool, ptx_target: str | None = None):
    resources = {name: asdict(r) for name, r in parse_ptxas_log(entry.log).items()}
    return CompileResult(module, arch, entry.cubin, resources, entry.compile_seconds, cached, ptx_target)


# --- one PTX, several archs ------------------------------------------------------------------------

_ARCH_MACRO_RE = re.compile(r"__CUDA_ARCH\w*__")
_ARCH_TEST_RE = re.compile(r"__CUDA_ARCH__\s*(>=|<=|==|!=|<|>)\s*(\d+)")


def arch_boundaries(text: str) -> tuple[int, ...] | None:
    """The __CUDA_ARCH__ values at which ``text`` changes (a test ``>= 900`` gives 900: archs below and
    from it see different code), or None when the macros are used in any other way (no sharing then)."""
    tests = _ARCH_TEST_RE.findall(text)
    if len(_ARCH_MACRO_RE.findall(text)) != len(tests):
        return None
    points = set()
    for op, value in tests:
        n = int(value)
        points |= {n} if op in (">=", "<") else {n + 1} if op in (">", "<=") else {n, n + 1}
    return tuple(sorted(points))


def ptx_groups(archs: list[str], boundaries: tuple[int, ...] | None) -> list[list[str]]:
    """The archs that can share one PTX, lowest arch first in each group: those on the same side of
    every boundary. Arch-specific targets (sm_90a) and modules with unknown arch tests stay alone."""
    groups: dict[object, list[str]] = {}
    for arch in sorted(archs, key=arch_number):
        if boundaries is None or not arch[-1].isdigit():
            groups[arch] = [arch]
        else:
            side = sum(arch_number(arch) * 10 >= b for b in boundaries)
            groups.setdefault(side, []).append(arch)
    return list(groups.values())


def ptx_target(arch: str) -> str:
    return arch.replace("sm_", "compute_")


def sharing_available() -> bool:
    """ptxas is installed and at least as new as NVRTC (it must read the PTX that NVRTC writes)."""
    found = ptxas()
    return found is not None and tuple(map(int, found[1].split("."))) >= tuple(map(int, nvrtc_version().split(".")))


def assembled_key(source: str, headers: dict[str, str], target: str, arch: str) -> str:
    headers = included_headers(source, headers)
    options = COMPILE_OPTIONS + (f"ptx {target}", f"ptxas {ptxas()[1]}")
    return cache.cache_key(source, headers, options, arch, nvrtc_version())


def compile_module_ptx(module: str, target: str, source: str, headers: dict[str, str]) -> cache.CachedCubin:
    """One module's PTX for virtual arch ``target``, through the cache (runs in a worker)."""
    return _compile_cached(module, source, headers, compile_ptx, NVVM_OPTIONS, target)[0]


def assemble_module(module: str, arch: str, target: str, key: str, ptx: bytes, ptx_seconds: float) -> CompileResult:
    """One arch's cubin from the module's shared PTX (runs in a worker). Its compile seconds include
    ``ptx_seconds``, its share of the PTX compile."""

    def assemble_now() -> cache.CachedCubin:
        cubin, log, seconds = assemble_cubin(ptx, module, arch)
        return cache.CachedCubin(cubin, log, round(seconds + ptx_seconds, 2))

    entry, cached = _cached_or(key, assemble_now)
    return _result(module, arch, entry, cached, target)


_ERROR_LINE_RE = re.compile(r"([\w.]+)\((\d+)\): (?:catastrophic )?error")
# Each entry point of a rendered module follows a comment line "// <variant name>: ..."
_VARIANT_COMMENT_RE = re.compile(rf"^// ({symbol_pattern().pattern}):")


def variants_at_errors(module: str, source: str, log: str) -> list[str]:
    """Names of the variants whose entry points hold the lines NVRTC reports errors on."""
    lines = source.splitlines()
    names = []
    for m in _ERROR_LINE_RE.finditer(log):
        if m.group(1) != f"{module}.cu":
            names.append(f"(shared code in {m.group(1)}: every variant)")
            continue
        for line in reversed(lines[: int(m.group(2))]):
            c = _VARIANT_COMMENT_RE.match(line)
            if c:
                names.append(c.group(1))
                break
        else:
            names.append("(shared template code: every variant)")
    return sorted(set(names))


_QUIET_SECONDS = 2.0  # how often a quiet build looks at its clock (progress lines every 10 s: at most 12 apart)


def compile_all(sources: dict[str, str], headers: dict[str, str], archs: list[str], jobs: int, advance,
                set_total, grouped_with: list[str] = ()) -> tuple[list[CompileResult], list[CompileError]]:
    """Every module's cubin for every arch, in a process pool: archs that can share a PTX get one PTX
    job, then an assembly job each once it is done; the others one NVRTC job each. Progress counts jobs.

    Which archs share a PTX is decided over ``archs`` and ``grouped_with`` (build.grouping_archs: the release
    archs and the default build's) together, so that whichever archs a build asks for, each one's cubin is made
    as in any other build (the same PTX target, the same assembly, the same cache entry): a one-arch build after
    a full one compiles nothing, and sm_90's cubins do not depend on whether sm_100 was built beside them."""
    share = sharing_available()
    grouping = sorted(set(archs) | set(grouped_with), key=arch_number)
    results: list[CompileResult] = []
    failures: list[CompileError] = []
    direct: list[tuple[str, str]] = []
    shared: list[tuple[str, str, list[tuple[str, str]]]] = []  # (module, PTX target, [(arch, cache key)])
    for module, source in sources.items():
        text = source + "".join(included_headers(source, headers).values())
        for group in ptx_groups(grouping, arch_boundaries(text) if share else None):
            wanted = [arch for arch in group if arch in archs]
            if not wanted:
                continue
            if len(group) == 1:
                direct.append((module, group[0]))
                continue
            target, todo = ptx_target(group[0]), []
            for arch in wanted:
                key = assembled_key(source, headers, target, arch)
                entry = cache.load(key)
                if entry is None:
                    todo.append((arch, key))
                else:
                    results.append(_result(module, arch, entry, True, target))
            if todo:
                shared.append((module, target, todo))
    set_total(len(results) + len(direct) + sum(1 + len(todo) for _, _, todo in shared))
    advance(len(results))
    workers = max(1, min(jobs, len(direct) + sum(len(todo) for _, _, todo in shared)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        running = {pool.submit(compile_module, m, a, sources[m], headers): None for m, a in direct}
        for module, target, todo in shared:
            running[pool.submit(compile_module_ptx, module, target, sources[module], headers)] = (module, target, todo)
        while running:
            done, _ = wait(running, timeout=_QUIET_SECONDS, return_when=FIRST_COMPLETED)
            if not done:
                advance(0)  # nothing finished for a while: progress that prints lines says so
            for future in done:
                group = running.pop(future)
                advance()
                try:
                    value = future.result()
                except CompileError as e:
                    failures.append(e)
                    if group is not None:
                        advance(len(group[2]))  # its assembly jobs will not run
                    continue
                if group is None:
                    results.append(value)
                    continue
                module, target, todo = group
                for arch, key in todo:
                    job = pool.submit(assemble_module, module, arch, target, key, value.cubin,
                                      round(value.compile_seconds / len(todo), 2))
                    running[job] = None
    return results, failures
