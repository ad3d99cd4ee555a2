"""Rendering, the ABI shared with the runtime, NVRTC compilation, ptxas parsing, the cache, the drift check."""

from __future__ import annotations

import json
import os
import re
import shutil
from concurrent.futures import ProcessPoolExecutor

import pytest
from rich.console import Console

from cukiln.codegen import build, decode_abi, emit, nvrtc, render
from cukiln.codegen.decode_variants import DecodeVariant, enumerate_decode
from cukiln.codegen.rope_abi import rope_params, struct_format
from cukiln.codegen.variants import Dtype, enumerate_rope

VARIANTS = list(enumerate_rope())
DECODE_VARIANTS = list(enumerate_decode())
ALL_VARIANTS = build.select_variants(None)


def test_rendering_is_deterministic():
    assert render.render_modules(ALL_VARIANTS) == render.render_modules(ALL_VARIANTS)
    assert render.render_headers() == render.render_headers()


def test_decode_modules_hold_every_decode_variant_and_their_structs_match_the_abi():
    sources = render.render_modules(DECODE_VARIANTS)
    assert set(sources) == {"decode_fp16", "decode_bf16"}
    for v in DECODE_VARIANTS:
        block = sources[v.module].split(f"struct {v.name}_params {{")[1].split("};")[0]
        fields = [line.strip().rstrip(";").rsplit(" ", 1)[1] for line in block.strip().splitlines()]
        assert fields == [f for _, f in decode_abi.decode_params(v)], v.name


def test_decode_dispatch_table_names_each_attention_variant_and_its_combine_kernel():
    namespace: dict = {}
    exec(emit.render_dispatch(ALL_VARIANTS), namespace)
    attention = [v for v in DECODE_VARIANTS if isinstance(v, DecodeVariant)]
    assert len(namespace["DECODE"]) == len(attention)
    for v in attention:
        module, symbol, layout_id, combine = namespace["DECODE"][v.key]
        assert (module, symbol) == (v.module, v.name)
        assert namespace["DECODE_PARAMS"][layout_id][0] == tuple(f for _, f in decode_abi.decode_params(v))
        assert combine == f"decode_combine_{v.dtype.value}_d{v.head_dim}"
    assert namespace["DECODE_SHARED"] == {(v.head_dim, v.pipeline.value): decode_abi.shared_bytes(v.head_dim, v.pipeline)
                                          for v in attention}
    assert namespace["DECODE_PIPELINES"] == ("narrow", "deep", "wide")
    assert namespace["DECODE_TILE_KEYS"] == {"narrow": 64, "deep": 64, "wide": 128}


def test_tuning_data_folds_into_the_decode_split_rule():
    namespace: dict = {}
    tuning = {"sm_90": {"decode": {"rule": {"blocks_per_sm": 3, "min_keys_per_split": 256, "wave_efficiency": 1,
                                            "extra": 1}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"blocks_per_sm": 3.0, "min_keys_per_split": 256,
                                                   "wave_efficiency": 1.0}}
    exec(emit.render_dispatch(ALL_VARIANTS), namespace)
    assert namespace["DECODE_SPLIT"] == {} and namespace["DECODE_SPLIT_DEFAULT"] == emit.DECODE_SPLIT_DEFAULT
    # a measured table (JSON lists) folds into tuples, which the runtime's cache can hash
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 2, 8, 6, 4], [64, 2048, 0, 2, 2, 1]]}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"table": ((8, 512, 2, 8, 6, 4), (64, 2048, 0, 2, 2, 1))}}
    # a table measured before the pipelines, (blocks, T, splits): the narrow pipeline with that count
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 8], [64, 2048, 2]]}}}}
    exec(emit.render_dispatch(ALL_VARIANTS, tuning), namespace)
    assert namespace["DECODE_SPLIT"] == {"sm_90": {"table": ((8, 512, 0, 8, 8, 8), (64, 2048, 0, 2, 2, 2))}}
    # a malformed point is refused at build, not at a call
    tuning = {"sm_90": {"decode": {"rule": {"table": [[8, 512, 5, 8, 4, 4]]}}}}
    with pytest.raises(ValueError, match="table point"):
        emit.render_dispatch(ALL_VARIANTS, tuning)


def test_a_module_cache_key_covers_only_the_headers_it_includes():
    headers = {"a.cuh": '#include "b.cuh"\n', "b.cuh": "// b\n", "c.cuh": "// c\n"}
    assert build.included_headers('#include "a.cuh"\n', headers) == {"a.cuh": headers["a.cuh"], "b.cuh": "// b\n"}
    sources = render.render_modules(ALL_VARIANTS)
    assert set(build.included_headers(sources["rope_bf16"], render.render_headers())) == {"common.cuh", "rope.cuh"}



def test_a_modules_hash_covers_its_source_and_the_headers_it_includes():
    headers = {"a.cuh": '#include "b.cuh"\n', "b.cuh": "// b\n", "c.cuh": "// c\n"}
    source = '#include "a.cuh"\n'
    before = build.module_sha256(source, headers)
    assert build.module_sha256(source, {**headers, "b.cuh": "// b, changed\n"}) != before  # a kernel body
    assert build.module_sha256(source, {**headers, "c.cuh": "// c, changed\n"}) == before  # not included
    assert build.module_sha256(source + "// more\n", headers) != before

def test_one_module_per_dtype_and_thd_dispatch_with_one_entry_per_variant():
    sources = render.render_modules(VARIANTS)
    assert set(sources) == {f"rope_{d.value}{suffix}" for d in Dtype for suffix in ("", "_thd_token", "_thd_grid")}
    for v in VARIANTS:
        src = sources[v.module]
        assert 'extern "C" __global__ void __launch_bounds__' in src
        assert re.search(rf"\b{v.name}\(const {v.name}_params p\)", src), v.name


def test_param_structs_match_the_abi():
    sources = render.render_modules(VARIANTS)
    for v in VARIANTS[:: 11]:
        src = sources[v.module]
        block = src.split(f"struct {v.name}_params {{")[1].split("};")[0]
        fields = [line.strip().rstrip(";").rsplit(" ", 1)[1] for line in block.strip().splitlines()]
        assert fields == [f for _, f in rope_params(v)]
        assert len(struct_format(rope_params(v))) - 1 == len(fields)


def test_dispatch_table_covers_every_variant_with_plain_tuples():
    namespace: dict = {}
    exec(emit.render_dispatch(VARIANTS), namespace)
    table = namespace["ROPE"]
    assert len(table) == len(VARIANTS)
    for v in VARIANTS:
        key = (v.dtype.value, v.layout.value, v.pairing.value, v.angles.value, v.strides, v.vec,
               v.dispatch.value)
        module, symbol, layout_id = table[key]
        assert (module, symbol) == (v.module, v.name)
        assert namespace["ROPE_PARAMS"][layout_id][0] == tuple(f for _, f in rope_params(v))


def test_tuning_data_folds_into_the_thd_rule():
    namespace: dict = {}
    tuning = {"sm_90": {"rope-thd": {"rule": {"grid_max_waste": 1.25}}}, "sm_80": {"other-op": {}}}
    exec(emit.render_dispatch(VARIANTS, tuning), namespace)
    assert namespace["ROPE_THD_GRID_MAX_WASTE"] == {"sm_90": 1.25}
    assert namespace["ROPE_THD_GRID_MAX_WASTE_DEFAULT"] == emit.THD_GRID_MAX_WASTE_DEFAULT
    exec(emit.render_dispatch(VARIANTS), namespace)
    assert namespace["ROPE_THD_GRID_MAX_WASTE"] == {}


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
COMPILE_ARCHS = ("sm_80", "sm_90")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every module for every arch, compiled once as `cukiln build` does (archs sharing a PTX where they
    can) into a fresh cache: (module, arch) -> result."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CUKILN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    sources, headers = render.render_modules(ALL_VARIANTS), render.render_headers()
    results, failures = build.compile_all(sources, headers, list(COMPILE_ARCHS), os.cpu_count() or 1,
                                          lambda n=1: None, lambda total: None)
    mp.undo()
    assert not failures
    return {(r.module, r.arch): r for r in results}


@pytest.mark.parametrize("arch", COMPILE_ARCHS)
@pytest.mark.parametrize("module", MODULES)
def test_every_variant_compiles_with_nvrtc_without_spills(arch, module, compiled):
    variants = [v for v in ALL_VARIANTS if v.module == module]
    result = compiled[(module, arch)]
    assert not result.cached, "compiled from source, not served by a cache"
    assert result.cubin[:4] == b"\x7fELF"
    assert set(result.resources) == {v.name for v in variants}
    spilling = {n: r for n, r in result.resources.items() if r["spill_store_bytes"] + r["spill_load_bytes"]}
    assert not spilling


def test_cache_hit_and_corruption_detection(isolated_cache):
    src = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }'
    first = build.compile_module("tiny", "sm_90", src, {})
    assert not first.cached
    second = build.compile_module("tiny", "sm_90", src, {})
    assert second.cached and second.cubin == first.cubin
    cubin_file = next(isolated_cache.glob("*.cubin"))
    cubin_file.write_bytes(cubin_file.read_bytes()[:100])  # truncate the entry
    third = build.compile_module("tiny", "sm_90", src, {})
    assert not third.cached and third.cubin == first.cubin


def test_compile_errors_name_the_variant_and_arch(isolated_cache):
    src = "// shared\n// rope_bf16_dense_half_freqs_s3_v8: entry\nextern \"C\" __global__ void k() { undefined_call(); }\n"
    with pytest.raises(nvrtc.CompileError) as info:
        build.compile_module("broken", "sm_90", src, {})
    assert info.value.arch == "sm_90" and "rope_bf16_dense_half_freqs_s3_v8" in info.value.variants
    assert "undefined_call" in str(info.value)


def test_drift_check_passes_on_the_checked_in_tree_and_fails_on_a_change(tmp_path):
    console = Console(file=open("/dev/null", "w"))
    assert build.check(emit.generated_dir(), console) == 0, "generated/ is stale: run `cukiln build`"
    copy = tmp_path / "generated"
    shutil.copytree(emit.generated_dir(), copy, ignore=shutil.ignore_patterns("cubins", "__pycache__"))
    assert build.check(copy, console) == 0
    (copy / "tuning" / "sm_90.json").unlink(missing_ok=True)  # tuning data feeds dispatch.py too
    if (emit.generated_dir() / "tuning" / "sm_90.json").exists():
        assert build.check(copy, console) == 1
        shutil.copy(emit.generated_dir() / "tuning" / "sm_90.json", copy / "tuning" / "sm_90.json")
    (copy / "rope_bf16.cu").write_text((copy / "rope_bf16.cu").read_text() + "// edited\n")
    assert build.check(copy, console) == 1
    (copy / "rope_bf16.cu").write_text(render.render_modules(ALL_VARIANTS)["rope_bf16"])
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["variants"] = manifest["variants"][1:]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert build.check(copy, console) == 1


def test_checked_in_manifest_records_resources_without_spills():
    manifest = emit.read_manifest()
    assert {"sm_80", "sm_90"} <= set(manifest["archs"])
    assert len(manifest["variants"]) == len(ALL_VARIANTS)
    for entry in manifest["variants"]:
        for arch, res in entry["resources"].items():
            assert res is not None, f"{entry['name']} has no resources for {arch}"
            assert res["spill_store_bytes"] + res["spill_load_bytes"] == 0, (entry["name"], arch)


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
    result = build.compile_module("tiny_race", "sm_90", _TINY, {})
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


def test_tuning_data_folds_into_the_rope_launch_rule():
    namespace: dict = {}
    rule = {"max_vector_bytes": 8, "packed_kernel": False, "max_threads": 128, "min_threads": 32}
    exec(emit.render_dispatch(VARIANTS, {"sm_90": {"rope": {"rule": rule}}}), namespace)
    assert namespace["ROPE_LAUNCH"] == {"sm_90": rule}
    assert namespace["ROPE_LAUNCH_DEFAULT"] == emit.ROPE_LAUNCH_DEFAULT
    exec(emit.render_dispatch(VARIANTS), namespace)
    assert namespace["ROPE_LAUNCH"] == {}


def _elf_sections(blob: bytes) -> dict[str, bytes]:
    """Section name -> contents of an ELF64 file (a cubin)."""
    import struct

    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", blob, shoff + i * entsize) for i in range(count)]
    names = headers[names_index][4]
    return {blob[names + h[0]:blob.index(b"\0", names + h[0])].decode(): blob[h[4]:h[4] + h[5]] for h in headers}


def test_arch_tests_in_the_source_decide_which_archs_share_a_ptx():
    assert build.arch_boundaries("int x;") == ()
    assert build.arch_boundaries("#if __CUDA_ARCH__ >= 900\n#endif\n#if __CUDA_ARCH__ < 900\n#endif") == (900,)
    assert build.arch_boundaries("#if __CUDA_ARCH__ > 799") == (800,)
    assert build.arch_boundaries("#if __CUDA_ARCH__ == 860") == (860, 861)
    assert build.arch_boundaries("#ifdef __CUDA_ARCH__") is None  # any other use: no sharing
    assert build.arch_boundaries("int v = __CUDA_ARCH__;") is None
    archs = ["sm_90", "sm_100", "sm_80"]
    assert build.ptx_groups(archs, ()) == [["sm_80", "sm_90", "sm_100"]]
    assert build.ptx_groups(archs, (900,)) == [["sm_80"], ["sm_90", "sm_100"]]
    assert build.ptx_groups(archs, None) == [["sm_80"], ["sm_90"], ["sm_100"]]
    assert build.ptx_groups(["sm_90", "sm_90a"], ()) == [["sm_90"], ["sm_90a"]]  # arch-specific: alone


_ARCH_TINY = """extern "C" __global__ void k(float* p) {
#if __CUDA_ARCH__ >= 900
  p[threadIdx.x] = 3.0f * threadIdx.x;
#else
  p[threadIdx.x] = 2.0f * threadIdx.x;
#endif
}"""


@pytest.mark.skipif(not build.sharing_available(), reason="no ptxas as new as NVRTC: the build compiles each arch alone")
def test_shared_ptx_gives_the_kernels_nvrtc_compiles_arch_by_arch(isolated_cache):
    sources = {"tiny": _TINY, "tiny_arch": _ARCH_TINY}
    steps = []
    results, failures = build.compile_all(sources, {}, ["sm_80", "sm_90", "sm_100"], 2, lambda n=1: steps.append(n),
                                          lambda total: steps.append(("total", total)))
    assert not failures and len(results) == 6
    # one PTX + 3 assemblies for tiny; tiny_arch: sm_80 alone (NVRTC), one PTX + 2 assemblies for sm_90, sm_100
    assert steps[0] == ("total", 4 + 1 + 3) and sum(n for n in steps[1:]) == 8
    by = {(r.module, r.arch): r for r in results}
    assert {k: r.ptx_target for k, r in by.items()} == {
        ("tiny", "sm_80"): "compute_80", ("tiny", "sm_90"): "compute_80", ("tiny", "sm_100"): "compute_80",
        ("tiny_arch", "sm_80"): None, ("tiny_arch", "sm_90"): "compute_90", ("tiny_arch", "sm_100"): "compute_90"}
    for (module, arch), r in by.items():
        alone = build.compile_module(module, arch, sources[module], {})
        shared, direct = _elf_sections(r.cubin), _elf_sections(alone.cubin)
        assert any(n.startswith(".text.") for n in shared) and r.resources.keys() == alone.resources.keys()
        if r.ptx_target in (None, arch.replace("sm_", "compute_")):
            # the PTX's own arch: the kernels NVRTC makes in one call, every section identical but the
            # toolkit note, which names the ptxas build
            assert {n: b for n, b in shared.items() if n != ".note.nv.tkinfo"} == \
                   {n: b for n, b in direct.items() if n != ".note.nv.tkinfo"}, (module, arch)
    again, _ = build.compile_all(sources, {}, ["sm_80", "sm_90", "sm_100"], 2, lambda n=1: None, lambda total: None)
    assert all(r.cached for r in again) and {(r.module, r.arch): r.cubin for r in again} == \
        {k: r.cubin for k, r in by.items()}


def test_assembly_errors_name_the_module_and_arch(isolated_cache):
    if nvrtc.ptxas() is None:
        pytest.skip("no ptxas installed")
    with pytest.raises(nvrtc.CompileError) as info:
        nvrtc.assemble_cubin(b".version 1.0\nnot ptx\n", "garbage", "sm_90")
    assert info.value.arch == "sm_90" and info.value.module == "garbage" and info.value.log
