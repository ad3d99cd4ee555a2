"""`cukiln build`: render every module, compile module x arch in a process pool, write generated/.

Archs on the same side of every ``__CUDA_ARCH__`` test a module makes share one PTX: NVRTC's front end
and NVVM (two thirds of a compile) run once, then ptxas (from the nvidia-cuda-nvcc wheel) assembles
each arch's cubin, the same kernels NVRTC would have made. Without ptxas (or one older than NVRTC)
every arch is compiled by NVRTC on its own.

``--check`` renders only (no compiler needed) and reports any drift between the templates and the
checked-in sources, manifest entries and dispatch table.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import cache, emit
from .nvrtc import (COMPILE_OPTIONS, NVVM_OPTIONS, CompileError, assemble_cubin, compile_cubin, compile_ptx,
                    nvrtc_version, parse_ptxas_log, ptxas)
from .render import render_headers, render_modules
from .decode_variants import enumerate_decode
from .variants import enumerate_rope

DEFAULT_ARCHS = ("sm_80", "sm_90", "sm_100")
_ARCH_RE = re.compile(r"^sm_\d+[a-z]?$")


def local_gpu_archs() -> list[str]:
    """The archs of the GPUs visible here; empty without a driver or a GPU."""
    try:
        from cuda.bindings import driver

        if driver.cuInit(0)[0] != driver.CUresult.CUDA_SUCCESS:
            return []
        err, count = driver.cuDeviceGetCount()
        archs = []
        for ordinal in range(count if err == driver.CUresult.CUDA_SUCCESS else 0):
            attr = driver.CUdevice_attribute
            major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ordinal)[1]
            minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ordinal)[1]
            archs.append(f"sm_{major}{minor}")
        return archs
    except Exception:  # no libcuda, no device: the build needs neither
        return []


def default_archs() -> list[str]:
    return sorted(set(DEFAULT_ARCHS) | set(local_gpu_archs()), key=arch_number)


def select_variants(only: str | None) -> list[emit.AnyVariant]:
    variants = [*enumerate_rope(), *enumerate_decode()]
    if only:
        pattern = re.compile(only)
        variants = [v for v in variants if pattern.search(v.name)]
    return variants


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


def arch_number(arch: str) -> int:
    return int(re.sub(r"\D", "", arch))


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
_VARIANT_COMMENT_RE = re.compile(r"^// ((?:rope|decode)_\w+):")


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


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )


def check(out_dir: Path, console: Console) -> int:
    """0 when generated/ matches what the templates produce, else 1 with the differences listed."""
    variants = select_variants(None)
    expected = emit.expected_files(render_modules(variants), render_headers(), variants, emit.read_tuning(out_dir))
    problems = []
    for name, text in expected.items():
        path = out_dir / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text() != text:
            problems.append(f"{name}: differs from what the templates produce")
    want = [emit.static_variant_entry(v) for v in variants]
    have = emit.static_view(emit.read_manifest(out_dir))
    if want != have:
        missing = {e["name"] for e in want} - {e["name"] for e in have}
        extra = {e["name"] for e in have} - {e["name"] for e in want}
        detail = f"{len(missing)} variants missing, {len(extra)} unexpected" if missing or extra else "entries differ"
        problems.append(f"{emit.MANIFEST}: {detail}")
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
    text = emit.render_dispatch(select_variants(None), emit.read_tuning(out_dir))
    changed = emit.write_text_if_changed(out_dir / emit.DISPATCH, text)
    console.print(f"{emit.DISPATCH}: {'rewritten' if changed else 'unchanged'} with the tuning of "
                  f"{', '.join(sorted(emit.read_tuning(out_dir))) or 'no arch'}")
    return 0


def compile_all(sources: dict[str, str], headers: dict[str, str], archs: list[str], jobs: int, advance,
                set_total) -> tuple[list[CompileResult], list[CompileError]]:
    """Every module's cubin for every arch, in a process pool: archs that can share a PTX get one PTX
    job, then an assembly job each once it is done; the others one NVRTC job each. Progress counts jobs."""
    share = len(archs) > 1 and sharing_available()
    results: list[CompileResult] = []
    failures: list[CompileError] = []
    direct: list[tuple[str, str]] = []
    shared: list[tuple[str, str, list[tuple[str, str]]]] = []  # (module, PTX target, [(arch, cache key)])
    for module, source in sources.items():
        text = source + "".join(included_headers(source, headers).values())
        for group in ptx_groups(archs, arch_boundaries(text) if share else None):
            if len(group) == 1:
                direct.append((module, group[0]))
                continue
            target, todo = ptx_target(group[0]), []
            for arch in group:
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
            done, _ = wait(running, return_when=FIRST_COMPLETED)
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


def build(archs: list[str], only: str | None, jobs: int, out_dir: Path, console: Console) -> int:
    for arch in archs:
        if not _ARCH_RE.match(arch):
            raise ValueError(f"--arch: expected names like sm_90, got {arch!r}")
    start = time.perf_counter()
    variants = select_variants(only)
    if not variants:
        console.print(f"[red]--only {only!r} matches no variant[/red]")
        return 1
    sources = render_modules(variants)
    headers = render_headers()
    with _progress(console) as progress:
        task = progress.add_task(f"compiling {len(variants)} variants", total=len(sources) * len(archs))
        results, failures = compile_all(sources, headers, archs, jobs, lambda n=1: progress.advance(task, n),
                                        lambda total: progress.update(task, total=total))
    if failures:
        for e in failures:
            console.print(f"[red]compile error[/red] in module {e.module} for {e.arch}; variants: "
                          f"{', '.join(e.variants) or '?'}\n{e.log}")
        return 1
    manifest = _write_outputs(out_dir, variants, sources, headers, results, archs)
    _print_summary(console, out_dir, manifest, results, time.perf_counter() - start)
    if only:
        console.print(f"[yellow]partial build[/yellow]: generated/ now holds {len(variants)} variants "
                      "(--only); run `cukiln build` without it to restore the full set")
    return 0


def _write_outputs(out_dir: Path, variants, sources, headers, results: list[CompileResult], archs) -> dict:
    for name, text in emit.expected_files(sources, headers, variants, emit.read_tuning(out_dir)).items():
        emit.write_text_if_changed(out_dir / name, text)
    version = nvrtc_version()
    modules: dict[str, dict] = {}
    for module, text in sources.items():
        modules[module] = {"source": f"{module}.cu", "source_sha256": module_sha256(text, headers),
                           "cubins": {}}
    resources: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: (r.module, r.arch)):
        path = out_dir / emit.cubin_relpath(r.arch, r.module)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != r.cubin:
            path.write_bytes(r.cubin)
        modules[r.module]["cubins"][r.arch] = {
            "path": emit.cubin_relpath(r.arch, r.module),
            "sha256": hashlib.sha256(r.cubin).hexdigest(),
            "bytes": len(r.cubin),
            "compile_seconds": r.compile_seconds,
            "nvrtc_version": version,
        }
        if r.ptx_target:  # built from a PTX shared with other archs
            modules[r.module]["cubins"][r.arch].update(ptx_target=r.ptx_target, ptxas_version=ptxas()[1])
        for symbol, res in r.resources.items():
            resources.setdefault(symbol, {})[r.arch] = res
    entries = []
    for v in variants:
        entry = emit.static_variant_entry(v)
        entry["resources"] = {arch: resources.get(v.name, {}).get(arch) for arch in archs}
        entries.append(entry)
    manifest = {"schema": emit.MANIFEST_SCHEMA, "nvrtc_version": version, "archs": list(archs),
                "modules": modules, "variants": entries}
    emit.write_manifest(out_dir / emit.MANIFEST, manifest)
    return manifest


def _print_summary(console: Console, out_dir: Path, manifest: dict, results: list[CompileResult], wall: float) -> None:
    table = Table(title="cukiln build", title_justify="left")
    for col in ("op", "arch", "variants", "modules", "compile s", "cached", "max registers", "spilling variants"):
        table.add_column(col, justify="right" if col not in ("op", "arch") else "left")
    ops = sorted({e["op"] for e in manifest["variants"]})
    for op in ops:
        entries = [e for e in manifest["variants"] if e["op"] == op]
        for arch in manifest["archs"]:
            res = [(e["name"], e["resources"][arch]) for e in entries if e["resources"].get(arch)]
            mods = {e["module"] for e in entries}
            rs = [r for r in results if r.arch == arch and r.module in mods]
            worst = max(res, key=lambda nr: nr[1]["registers"], default=None)
            spilling = sum(1 for _, r in res if r["spill_store_bytes"] + r["spill_load_bytes"] > 0)
            table.add_row(
                op, arch, str(len(res)), str(len(mods)), f"{sum(r.compile_seconds for r in rs):.1f}",
                f"{sum(r.cached for r in rs)}/{len(rs)}",
                f"{worst[1]['registers']}" if worst else "-",
                f"[red]{spilling}[/red]" if spilling else "0",
            )
    console.print(table)
    console.print(f"wrote {out_dir} in {wall:.1f} s (NVRTC {manifest['nvrtc_version']})")


def default_jobs() -> int:
    return os.cpu_count() or 1
