"""Compilation: NVRTC through the content-addressed cache, ptxas log parsing, compile errors named by variant and
arch, archs that share one PTX, and every emitted variant compiled without spills."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from cukiln.codegen import build, compile as compile_, nvrtc, render
from cukiln.codegen.ops import all_variants
from cukiln.core import artifacts
from cukiln.core.archs import DEFAULT_ARCHS, RELEASE_ARCHS

ALL_VARIANTS = all_variants()


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kernel_a' for 'sm_90'
ptxas info    : Function properties for kernel_a
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compiling entry function 'kernel_b' for 'sm_90'
ptxas info    : Function properties for kernel_b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 0 barriers
"""

def test_ptxas_log_parsing():
    res = nvrtc.parse_ptxas_log(PTXAS_LOG)
    assert res["kernel_a"] == nvrtc.Resources(40, 1024, 16, 8, 4)
    assert res["kernel_a"].spill_bytes == 12
    assert res["kernel_b"] == nvrtc.Resources(128, 0, 0, 0, 0)

@pytest.fixture

def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUKILN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


MODULES = sorted({v.module for v in ALL_VARIANTS})


@pytest.fixture(scope="module")
def compiled():
    """Every module for every default arch, as `cukiln build` compiles them (archs sharing a PTX where they can),
    through the user's compile cache: (module, arch) -> result. CI's `cukiln build` (.ci/run) has just filled the
    cache from these very sources, so this costs seconds there; elsewhere it compiles what is missing. The cache
    is content-addressed (source, included headers, options, arch, NVRTC version) and verifies each cubin's hash,
    so an entry it serves is what these sources compile to."""
    sources, headers = render.render_modules(ALL_VARIANTS), render.render_headers()
    results, failures = compile_.compile_all(sources, headers, list(DEFAULT_ARCHS), os.cpu_count() or 1,
                                          lambda n=1: None, lambda total: None, build.grouping_archs())
    assert not failures, [str(e) for e in failures]
    return {(r.module, r.arch): r for r in results}


@pytest.mark.parametrize("arch", DEFAULT_ARCHS)
@pytest.mark.parametrize("module", MODULES)
def test_every_variant_compiles_with_nvrtc_without_spills(arch, module, compiled):
    variants = [v for v in ALL_VARIANTS if v.module == module]
    result = compiled[(module, arch)]
    assert result.cubin[:4] == b"\x7fELF"
    assert set(result.resources) == {v.name for v in variants}
    spilling = {n: r for n, r in result.resources.items() if r["spill_store_bytes"] + r["spill_load_bytes"]}
    assert not spilling
    manifest = artifacts.read_manifest()
    if manifest.get("nvrtc_version") == nvrtc.nvrtc_version():  # the committed manifest describes these cubins
        import hashlib

        assert manifest["modules"][module]["cubins"][arch]["sha256"] == hashlib.sha256(result.cubin).hexdigest()


def _smallest_module_of_each_family() -> dict[str, str]:
    """For each family, the module with the fewest variants among those holding the family's own op (its name)."""
    from cukiln.codegen.ops import FAMILIES

    picked = {}
    for family in FAMILIES:
        counts: dict[str, int] = {}
        for v in family.enumerate():
            if v.op == family.name:
                counts[v.module] = counts.get(v.module, 0) + 1
        picked[family.name] = min(sorted(counts), key=counts.get)
    return picked


@pytest.mark.parametrize("arch", [a for a in RELEASE_ARCHS if a not in DEFAULT_ARCHS])
def test_each_family_compiles_without_spills_for_the_release_archs_the_default_build_leaves_out(arch):
    """A wheel ships every release arch, while `cukiln build` (and so CI) compiles the default archs alone: one
    module of each family for each other release arch keeps the templates compiling there, spill-free. The smallest
    module each: sm_100 assembles from the compute_90 PTX the default build has cached, sm_80 compiles alone."""
    picked = _smallest_module_of_each_family()
    sources = {m: s for m, s in render.render_modules(ALL_VARIANTS).items() if m in picked.values()}
    results, failures = compile_.compile_all(sources, render.render_headers(), [arch], os.cpu_count() or 1,
                                          lambda n=1: None, lambda total: None, build.grouping_archs())
    assert not failures, [str(e) for e in failures]
    assert {r.module for r in results} == set(picked.values()) and {r.arch for r in results} == {arch}
    for r in results:
        assert r.cubin[:4] == b"\x7fELF"
        assert set(r.resources) == {v.name for v in ALL_VARIANTS if v.module == r.module}
        assert not {n for n, res in r.resources.items() if res["spill_store_bytes"] + res["spill_load_bytes"]}


def test_cache_hit_and_corruption_detection(isolated_cache):
    src = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }'
    first = compile_.compile_module("tiny", "sm_90", src, {})
    assert not first.cached
    second = compile_.compile_module("tiny", "sm_90", src, {})
    assert second.cached and second.cubin == first.cubin
    cubin_file = next(isolated_cache.glob("*.cubin"))
    cubin_file.write_bytes(cubin_file.read_bytes()[:100])  # truncate the entry
    third = compile_.compile_module("tiny", "sm_90", src, {})
    assert not third.cached and third.cubin == first.cubin

def test_compile_errors_name_the_variant_and_arch(isolated_cache):
    src = "// shared\n// rope_bf16_dense_half_freqs_s3_v8: entry\nextern \"C\" __global__ void k() { undefined_call(); }\n"
    with pytest.raises(nvrtc.CompileError) as info:
        compile_.compile_module("broken", "sm_90", src, {})
    assert info.value.arch == "sm_90" and "rope_bf16_dense_half_freqs_s3_v8" in info.value.variants
    assert "undefined_call" in str(info.value)

def test_compile_errors_cross_the_process_pool_intact():
    """Build workers raise CompileError; it must unpickle in the parent (else the pool breaks)."""
    import pickle

    error = nvrtc.CompileError("decode_bf16", "sm_90", "decode.cuh(1): error: x", ["decode_bf16_d64_s3_v8"])
    again = pickle.loads(pickle.dumps(error))
    assert (again.module, again.arch, again.log, again.variants) == (error.module, error.arch, error.log,
                                                                      error.variants)
    assert str(again) == str(error)

_TINY = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 2.0f * threadIdx.x; }'

def _compile_after(barrier):
    barrier.wait()
    result = compile_.compile_module("tiny_race", "sm_90", _TINY, {})
    return result.cached, result.cubin

def test_two_processes_compiling_one_module_take_turns(isolated_cache):
    """The second process waits on the entry's lock and takes the first one's cubin."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # children inherit CUKILN_CACHE_DIR from the environment
    with ctx.Manager() as manager:
        barrier = manager.Barrier(2)
        with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
            results = [f.result() for f in [pool.submit(_compile_after, barrier) for _ in range(2)]]
    assert sorted(cached for cached, _ in results) == [False, True], "exactly one process compiled"
    assert results[0][1] == results[1][1] and results[0][1][:4] == b"\x7fELF"

def _elf_sections(blob: bytes) -> dict[str, bytes]:
    """Section name -> contents of an ELF64 file (a cubin)."""
    import struct

    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", blob, shoff + i * entsize) for i in range(count)]
    names = headers[names_index][4]
    return {blob[names + h[0]:blob.index(b"\0", names + h[0])].decode(): blob[h[4]:h[4] + h[5]] for h in headers}

def test_arch_tests_in_the_source_decide_which_archs_share_a_ptx():
    assert compile_.arch_boundaries("int x;") == ()
    assert compile_.arch_boundaries("#if __CUDA_ARCH__ >= 900\n#endif\n#if __CUDA_ARCH__ < 900\n#endif") == (900,)
    assert compile_.arch_boundaries("#if __CUDA_ARCH__ > 799") == (800,)
    assert compile_.arch_boundaries("#if __CUDA_ARCH__ == 860") == (860, 861)
    assert compile_.arch_boundaries("#ifdef __CUDA_ARCH__") is None  # any other use: no sharing
    assert compile_.arch_boundaries("int v = __CUDA_ARCH__;") is None
    archs = ["sm_90", "sm_100", "sm_80"]
    assert compile_.ptx_groups(archs, ()) == [["sm_80", "sm_90", "sm_100"]]
    assert compile_.ptx_groups(archs, (900,)) == [["sm_80"], ["sm_90", "sm_100"]]
    assert compile_.ptx_groups(archs, None) == [["sm_80"], ["sm_90"], ["sm_100"]]
    assert compile_.ptx_groups(["sm_90", "sm_90a"], ()) == [["sm_90"], ["sm_90a"]]  # arch-specific: alone

_ARCH_TINY = """extern "C" __global__ void k(float* p) {
#if __CUDA_ARCH__ >= 900
  p[threadIdx.x] = 3.0f * threadIdx.x;
#else
  p[threadIdx.x] = 2.0f * threadIdx.x;
#endif
}"""

@pytest.mark.skipif(not compile_.sharing_available(), reason="no ptxas as new as NVRTC: the build compiles each arch alone")

def test_shared_ptx_gives_the_kernels_nvrtc_compiles_arch_by_arch(isolated_cache):
    sources = {"tiny": _TINY, "tiny_arch": _ARCH_TINY}
    steps = []
    results, failures = compile_.compile_all(sources, {}, ["sm_80", "sm_90", "sm_100"], 2, lambda n=1: steps.append(n),
                                          lambda total: steps.append(("total", total)))
    assert not failures and len(results) == 6
    # one PTX + 3 assemblies for tiny; tiny_arch: sm_80 alone (NVRTC), one PTX + 2 assemblies for sm_90, sm_100
    assert steps[0] == ("total", 4 + 1 + 3) and sum(n for n in steps[1:]) == 8
    by = {(r.module, r.arch): r for r in results}
    assert {k: r.ptx_target for k, r in by.items()} == {
        ("tiny", "sm_80"): "compute_80", ("tiny", "sm_90"): "compute_80", ("tiny", "sm_100"): "compute_80",
        ("tiny_arch", "sm_80"): None, ("tiny_arch", "sm_90"): "compute_90", ("tiny_arch", "sm_100"): "compute_90"}
    for (module, arch), r in by.items():
        alone = compile_.compile_module(module, arch, sources[module], {})
        shared, direct = _elf_sections(r.cubin), _elf_sections(alone.cubin)
        assert any(n.startswith(".text.") for n in shared) and r.resources.keys() == alone.resources.keys()
        if r.ptx_target in (None, arch.replace("sm_", "compute_")):
            # the PTX's own arch: the kernels NVRTC makes in one call, every section identical but the
            # toolkit note, which names the ptxas build
            assert {n: b for n, b in shared.items() if n != ".note.nv.tkinfo"} == \
                   {n: b for n, b in direct.items() if n != ".note.nv.tkinfo"}, (module, arch)
    again, _ = compile_.compile_all(sources, {}, ["sm_80", "sm_90", "sm_100"], 2, lambda n=1: None, lambda total: None)
    assert all(r.cached for r in again) and {(r.module, r.arch): r.cubin for r in again} == \
        {k: r.cubin for k, r in by.items()}

@pytest.mark.skipif(not compile_.sharing_available(), reason="no ptxas as new as NVRTC: the build compiles each arch alone")
def test_a_build_for_some_archs_makes_the_default_builds_cubins_for_them(isolated_cache):
    """`cukiln build --arch sm_90` after `cukiln build`: the same PTX target, the same cubin, from the cache."""
    sources = {"tiny": _TINY, "tiny_arch": _ARCH_TINY}
    archs = ["sm_80", "sm_90", "sm_100"]
    full, _ = compile_.compile_all(sources, {}, archs, 2, lambda n=1: None, lambda total: None)
    made = {(r.module, r.arch): (r.cubin, r.ptx_target) for r in full}
    for arch in archs:
        some, failures = compile_.compile_all(sources, {}, [arch], 1, lambda n=1: None, lambda total: None, archs)
        assert not failures and {r.arch for r in some} == {arch} and all(r.cached for r in some), arch
        assert {(r.module, r.arch): (r.cubin, r.ptx_target) for r in some} == \
            {key: value for key, value in made.items() if key[1] == arch}


def test_assembly_errors_name_the_module_and_arch(isolated_cache):
    if nvrtc.ptxas() is None:
        pytest.skip("no ptxas installed")
    with pytest.raises(nvrtc.CompileError) as info:
        nvrtc.assemble_cubin(b".version 1.0\nnot ptx\n", "garbage", "sm_90")
    assert info.value.arch == "sm_90" and info.value.module == "garbage" and info.value.log
