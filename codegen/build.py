"""`cukiln build`: render every module, compile module x arch in a process pool (compile.py), write generated/.

The manifest holds what the sources and the compiler determine (resources, cubin hashes, PTX targets); a build
for some archs keeps the other archs' entries of every module whose source is unchanged, so `--arch sm_80` does
not drop sm_90. Compile times go to an untracked log beside the cubins (core.artifacts.BUILD_LOG).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cukiln.core import artifacts
from cukiln.core.archs import DEFAULT_ARCHS, RELEASE_ARCHS, arch_number, check_arch

from . import emit
from .compile import CompileResult, compile_all, module_sha256
from .nvrtc import nvrtc_version, ptxas
from .ops import all_variants
from .render import render_headers, render_modules


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


def grouping_archs() -> list[str]:
    """The archs whose PTX sharing every build follows (compile_all): the release archs and the default build's."""
    return sorted(set(RELEASE_ARCHS) | set(default_archs()), key=arch_number)


def default_jobs() -> int:
    return os.cpu_count() or 1


def select_variants(only: str | None) -> list:
    """Every variant of every family, or those whose name matches the regex ``only`` (ValueError if it is none)."""
    variants = all_variants()
    if only:
        try:
            pattern = re.compile(only)
        except re.error as e:
            raise ValueError(f"--only: {only!r} is not a regular expression ({e})") from None
        variants = [v for v in variants if pattern.search(v.name)]
    return variants


class _Lines:
    """Progress on a console that is not a terminal (a log, a CI job, a pipe): a line for each finished compile
    job, and one at least every ``period`` seconds while none finishes (compile_all calls ``advance(0)``)."""

    def __init__(self, console: Console, description: str, period: float = 10.0):
        self.console, self.description, self.period = console, description, period
        self.done, self.total, self.start, self.said = 0, 0, time.perf_counter(), 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if n or now - self.said >= self.period:
            self.said = now
            elapsed = int(now - self.start)
            self.console.print(f"{self.description}: {self.done}/{self.total} compile jobs, "
                               f"{elapsed // 60}:{elapsed % 60:02d}", soft_wrap=True)

    def set_total(self, total: int) -> None:
        self.total = total


@contextmanager
def _progress(console: Console, description: str):
    """(advance(n), set_total(total)) for compile_all: a bar on a terminal, lines elsewhere."""
    if not console.is_terminal:
        lines = _Lines(console, description)
        yield lines.advance, lines.set_total
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        task = bar.add_task(description, total=None)
        yield (lambda n=1: bar.advance(task, n)), (lambda total: bar.update(task, total=total))


def build(archs: list[str], only: str | None, jobs: int, out_dir: Path, console: Console) -> int:
    """Compile the variants (all, or those ``only`` matches) for ``archs`` and write generated/; ValueError for
    bad options (an unsupported arch, a bad regex) before anything compiles."""
    for arch in archs:
        check_arch(arch)
    start = time.perf_counter()
    variants = select_variants(only)
    if not variants:
        raise ValueError(f"--only {only!r} matches no variant")
    sources = render_modules(variants)
    headers = render_headers()
    description = f"{len(variants)} variants in {len(sources)} modules for {', '.join(archs)}"
    with _progress(console, description) as (advance, set_total):
        results, failures = compile_all(sources, headers, archs, jobs, advance, set_total, grouping_archs())
    if failures:
        for e in failures:
            console.print(f"[red]compile error[/red] in module {e.module} for {e.arch}; variants: "
                          f"{', '.join(e.variants) or '?'}\n{e.log}")
        return 1
    manifest = write_outputs(out_dir, variants, sources, headers, results, archs)
    _print_summary(console, out_dir, manifest, results, time.perf_counter() - start)
    if only:
        console.print(f"[yellow]partial build[/yellow]: generated/ now holds {len(variants)} variants "
                      "(--only); run `cukiln build` without it to restore the full set")
    return 0


def write_outputs(out_dir: Path, variants, sources: dict[str, str], headers: dict[str, str],
                  results: list[CompileResult], archs: list[str]) -> dict:
    """Sources, dispatch table, cubins, manifest and build log; returns the manifest written."""
    for name, text in emit.expected_files(sources, headers, variants, artifacts.read_tuning(out_dir)).items():
        artifacts.write_text_if_changed(out_dir / name, text)
    previous = artifacts.read_manifest(out_dir)
    log = artifacts.read_build_log(out_dir)
    times = log.setdefault("compile_seconds", {})
    version = nvrtc_version()
    modules: dict[str, dict] = {}
    for module, text in sources.items():
        modules[module] = {"source": f"{module}.cu", "source_sha256": module_sha256(text, headers), "cubins": {}}
        before = previous.get("modules", {}).get(module, {})
        if before.get("source_sha256") == modules[module]["source_sha256"]:
            # the other archs' cubins of an unchanged module stay described (a build for some archs only)
            modules[module]["cubins"] = {a: c for a, c in before.get("cubins", {}).items() if a not in archs}
    resources: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: (r.module, r.arch)):
        path = out_dir / artifacts.cubin_relpath(r.arch, r.module)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != r.cubin:
            path.write_bytes(r.cubin)
        entry = {"path": artifacts.cubin_relpath(r.arch, r.module), "sha256": hashlib.sha256(r.cubin).hexdigest(),
                 "bytes": len(r.cubin), "nvrtc_version": version}
        if r.ptx_target:  # built from a PTX shared with other archs
            entry.update(ptx_target=r.ptx_target, ptxas_version=ptxas()[1])
        modules[r.module]["cubins"][r.arch] = dict(sorted(entry.items()))
        times.setdefault(r.arch, {})[r.module] = r.compile_seconds
        texts = artifacts.kernel_texts(r.cubin)
        for symbol, res in r.resources.items():  # with each kernel's machine code: what tuning fingerprints
            resources.setdefault(symbol, {})[r.arch] = {**res, "text_sha256": hashlib.sha256(texts[symbol]).hexdigest()}
    for module in modules.values():
        module["cubins"] = dict(sorted(module["cubins"].items(), key=lambda item: arch_number(item[0])))
    # archs built before stay listed: where a module changed since, its variants show no resources for them
    # there (`cukiln report`: missing arch) until a build for those archs
    all_archs = sorted(set(archs) | set(previous.get("archs", [])), key=arch_number)
    old_entries = {e["name"]: e for e in previous.get("variants", [])}
    entries = []
    for v in variants:
        entry = emit.static_variant_entry(v)
        kept_resources = old_entries.get(v.name, {}).get("resources", {})
        entry["resources"] = {
            arch: resources.get(v.name, {}).get(arch) if arch in archs
            else (kept_resources.get(arch) if arch in modules[v.module]["cubins"] else None)
            for arch in all_archs}
        entries.append(entry)
    manifest = {"schema": artifacts.MANIFEST_SCHEMA, "nvrtc_version": version, "archs": all_archs,
                "modules": modules, "variants": entries}
    artifacts.write_manifest(manifest, out_dir)
    artifacts.write_build_log(log, out_dir)
    return manifest


def _print_summary(console: Console, out_dir: Path, manifest: dict, results: list[CompileResult], wall: float) -> None:
    table = Table(title="cukiln build", title_justify="left")
    for col in ("op", "arch", "variants", "modules", "compile s", "cached", "max registers", "spilling variants"):
        table.add_column(col, justify="right" if col not in ("op", "arch") else "left", no_wrap=col in ("op", "arch"))
    built = {r.arch for r in results}
    ops = sorted({e["op"] for e in manifest["variants"]})
    for op in ops:
        entries = [e for e in manifest["variants"] if e["op"] == op]
        for arch in (a for a in manifest["archs"] if a in built):
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
    others = [a for a in manifest["archs"] if a not in built]
    if others:
        console.print(f"kept from the previous build: {', '.join(others)}")
    console.print(f"wrote {out_dir} in {wall:.1f} s (NVRTC {manifest['nvrtc_version']})")
