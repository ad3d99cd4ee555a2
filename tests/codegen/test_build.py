"""`cukiln build`'s outputs: a manifest that holds only what the sources determine (a rebuild leaves it byte for
byte), a build for some archs that keeps the others' entries, and bad options refused before anything compiles."""

from __future__ import annotations

import hashlib
import io
import json
import shutil

import pytest
from rich.console import Console

from cukiln.codegen import build
from cukiln.codegen.compile import CompileResult
from cukiln.codegen.render import render_headers, render_modules
from cukiln.core import artifacts
from tests.cubins import elf_file

RES = {"registers": 40, "shared_bytes": 0, "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0}


VARIANTS = [v for v in build.select_variants(r"^rope_fp32_dense") if v.module == "rope_fp32"]


def _fake_cubin(cubin: bytes, arch: str) -> bytes:
    """An ELF file of one .text section a kernel: ``cubin``, the arch's name and the kernel's."""
    return elf_file({f".text.{v.name}": cubin + arch.encode() + v.name.encode() for v in VARIANTS})


def _fake_build(out_dir, archs, seconds, cubin=b"fake"):
    """build.write_outputs for the rope_fp32 module alone, with made-up compile results (_fake_cubin)."""
    sources, headers = render_modules(VARIANTS), render_headers()
    results = [CompileResult("rope_fp32", arch, _fake_cubin(cubin, arch), {v.name: RES for v in VARIANTS}, seconds,
                             False)
               for arch in archs]
    return build.write_outputs(out_dir, VARIANTS, sources, headers, results, archs)


@pytest.fixture
def out_dir(tmp_path):
    return tmp_path / "generated"


def test_a_rebuild_with_other_compile_times_leaves_the_manifest_byte_for_byte(out_dir):
    _fake_build(out_dir, ["sm_80", "sm_90"], 1.5)
    first = (out_dir / artifacts.MANIFEST).read_bytes()
    assert b"compile_seconds" not in first  # per-run facts go to the untracked build log
    _fake_build(out_dir, ["sm_80", "sm_90"], 7.25)
    assert (out_dir / artifacts.MANIFEST).read_bytes() == first
    assert artifacts.read_build_log(out_dir)["compile_seconds"]["sm_90"]["rope_fp32"] == 7.25


def test_a_build_for_one_arch_keeps_the_other_archs_entries(out_dir):
    _fake_build(out_dir, ["sm_80", "sm_90"], 1.0)
    manifest = _fake_build(out_dir, ["sm_80"], 1.0, cubin=b"rebuilt")
    assert manifest["archs"] == ["sm_80", "sm_90"]
    cubins = manifest["modules"]["rope_fp32"]["cubins"]
    assert set(cubins) == {"sm_80", "sm_90"}
    # the rebuilt arch's entry is the new cubin's, the other arch's the first build's
    digest = {arch: hashlib.sha256(_fake_cubin(cubin, arch)).hexdigest()
              for arch, cubin in (("sm_80", b"rebuilt"), ("sm_90", b"fake"))}
    assert {arch: cubins[arch]["sha256"] for arch in cubins} == digest
    for e in manifest["variants"]:  # each kernel's resources and machine code as its arch's last build left them
        for arch, cubin in (("sm_80", b"rebuilt"), ("sm_90", b"fake")):
            text = cubin + arch.encode() + e["name"].encode()
            assert e["resources"][arch] == {**RES, "text_sha256": hashlib.sha256(text).hexdigest()}


def test_a_changed_module_drops_the_entries_of_archs_not_rebuilt(out_dir):
    _fake_build(out_dir, ["sm_80", "sm_90"], 1.0)
    manifest = json.loads((out_dir / artifacts.MANIFEST).read_text())
    manifest["modules"]["rope_fp32"]["source_sha256"] = "an older source"
    (out_dir / artifacts.MANIFEST).write_text(json.dumps(manifest))
    manifest = _fake_build(out_dir, ["sm_80"], 1.0)
    assert set(manifest["modules"]["rope_fp32"]["cubins"]) == {"sm_80"}
    assert all(e["resources"]["sm_90"] is None for e in manifest["variants"])  # report: "missing arch"


@pytest.mark.parametrize("arch, message", [("sm_75", "sm_80 or newer"), ("sm_9x", "like sm_90"), ("90", "like sm_90")])
def test_an_unsupported_arch_is_one_error_before_anything_compiles(out_dir, arch, message, monkeypatch):
    monkeypatch.setattr(build, "compile_all", lambda *a, **k: pytest.fail("compiled an unsupported arch"))
    with pytest.raises(ValueError, match=message):
        build.build(["sm_90", arch], None, 1, out_dir, Console(file=io.StringIO()))
    assert not out_dir.exists()


def test_a_bad_only_regex_is_a_value_error():
    with pytest.raises(ValueError, match="not a regular expression"):
        build.select_variants("[")


def test_the_checked_in_manifest_is_byte_for_byte_what_its_writer_writes(tmp_path):
    """The manifest committed is in the writer's own form: rewriting it from its own entries changes nothing. That a
    rebuild from the sources writes these entries is .ci/run's check (`cukiln build`, then no tracked file changed),
    which needs the compiled cubins."""
    copy = tmp_path / "generated"
    shutil.copytree(artifacts.generated_dir(), copy, ignore=shutil.ignore_patterns("cubins", "__pycache__"))
    manifest = artifacts.read_manifest(copy)
    assert manifest["schema"] == artifacts.MANIFEST_SCHEMA
    assert not any("compile_seconds" in c for m in manifest["modules"].values() for c in m["cubins"].values())
    artifacts.write_manifest(manifest, copy)
    assert (copy / artifacts.MANIFEST).read_bytes() == (artifacts.generated_dir() / artifacts.MANIFEST).read_bytes()


def test_a_build_piped_to_a_file_prints_progress_lines(monkeypatch):
    """Not a terminal (a log, a CI job): a line for each finished job, and one while none finishes for a period."""
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    clock = iter([0.0, 1.0, 2.0, 30.0, 31.0])
    monkeypatch.setattr(build.time, "perf_counter", lambda: next(clock))
    with build._progress(console, "3 variants in 2 modules for sm_90") as (advance, set_total):
        set_total(2)
        advance()      # t 1: a job done
        advance(0)     # t 2: quiet, but a line went out a second ago
        advance(0)     # t 30: quiet for longer than the period
        advance()      # t 31
    lines = console.file.getvalue().splitlines()
    assert lines == ["3 variants in 2 modules for sm_90: 1/2 compile jobs, 0:01",
                     "3 variants in 2 modules for sm_90: 1/2 compile jobs, 0:30",
                     "3 variants in 2 modules for sm_90: 2/2 compile jobs, 0:31"]
