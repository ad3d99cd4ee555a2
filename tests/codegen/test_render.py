"""Rendering: one module per (op, dtype, layout, dispatch), structs that match each family's ABI, the headers a
module includes and the hash that covers them."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from cukiln.codegen import compile as compile_, decode_abi, render
from cukiln.codegen.abi import struct_format
from cukiln.codegen.axes import Dtype
from cukiln.codegen.decode_variants import enumerate_decode
from cukiln.codegen.ops import all_variants
from cukiln.codegen.rope_abi import params_layout_id as rope_params_layout_id
from cukiln.codegen.rope_abi import rope_params
from cukiln.codegen.rope_variants import enumerate_rope

VARIANTS = list(enumerate_rope())
DECODE_VARIANTS = list(enumerate_decode())
ALL_VARIANTS = all_variants()


def kernel_fields(src: str, name: str) -> list[str]:
    """The field names of the struct that kernel ``name`` of module source ``src`` takes."""
    struct = re.search(rf"\b{name}\(const (?:__grid_constant__ )?(\w+) \w+\)", src).group(1)
    assert src.count(f"struct {struct} {{") == 1, f"{struct}: declared once in its module"
    block = src.split(f"struct {struct} {{")[1].split("};")[0]
    return [line.strip().rstrip(";").rsplit(" ", 1)[1] for line in block.strip().splitlines()]


def test_rendering_is_deterministic():
    assert render.render_modules(ALL_VARIANTS) == render.render_modules(ALL_VARIANTS)
    assert render.render_headers() == render.render_headers()


def test_rendering_is_the_same_in_processes_of_other_hash_seeds():
    # within one process a set's order is fixed; across processes (another build, CI's drift check) string hashing
    # changes it, and a source that followed one would change with it
    program = ("import hashlib; from cukiln.codegen import render; from cukiln.codegen.ops import all_variants; "
               "m = render.render_modules(all_variants()); h = render.render_headers(); "
               "print(hashlib.sha256(repr((sorted(m.items()), sorted(h.items()))).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(digests) == 1 and len(digests.pop().strip()) == 64, digests

def test_decode_modules_hold_every_decode_variant_and_their_structs_match_the_abi():
    sources = render.render_modules(DECODE_VARIANTS)
    assert set(sources) == {f"decode_{t}{kind}" for t in ("fp16", "bf16") for kind in ("", "_e4m3", "_paged",
                                                                                     "_e4m3_paged")} | {
        "decode_merge_fp16", "decode_merge_bf16"}
    for v in DECODE_VARIANTS:
        assert kernel_fields(sources[v.module], v.name) == [f for _, f in decode_abi.decode_params(v)], v.name

def test_a_module_cache_key_covers_only_the_headers_it_includes():
    headers = {"a.cuh": '#include "b.cuh"\n', "b.cuh": "// b\n", "c.cuh": "// c\n"}
    assert compile_.included_headers('#include "a.cuh"\n', headers) == {"a.cuh": headers["a.cuh"], "b.cuh": "// b\n"}
    sources = render.render_modules(ALL_VARIANTS)
    assert set(compile_.included_headers(sources["rope_bf16"], render.render_headers())) == {"common.cuh", "rope.cuh"}

def test_a_modules_hash_covers_its_source_and_the_headers_it_includes():
    headers = {"a.cuh": '#include "b.cuh"\n', "b.cuh": "// b\n", "c.cuh": "// c\n"}
    source = '#include "a.cuh"\n'
    before = compile_.module_sha256(source, headers)
    assert compile_.module_sha256(source, {**headers, "b.cuh": "// b, changed\n"}) != before  # a kernel body
    assert compile_.module_sha256(source, {**headers, "c.cuh": "// c, changed\n"}) == before  # not included
    assert compile_.module_sha256(source + "// more\n", headers) != before

def test_one_module_per_dtype_and_thd_dispatch_with_one_entry_per_variant():
    sources = render.render_modules(VARIANTS)
    assert set(sources) == {f"rope_{d.value}{suffix}" for d in Dtype
                            for suffix in ("", "_mrope", "_thd_token", "_thd_grid")}
    for v in VARIANTS:
        src = sources[v.module]
        assert 'extern "C" __global__ void __launch_bounds__' in src
        assert re.search(rf"\b{v.name}\(const params_{rope_params_layout_id(v)} p\)", src), v.name

def test_param_structs_match_the_abi():
    sources = render.render_modules(VARIANTS)
    for v in VARIANTS[:: 11]:
        src = sources[v.module]
        fields = kernel_fields(src, v.name)
        assert fields == [f for _, f in rope_params(v)]
        assert len(struct_format(rope_params(v))) - 1 == len(fields)
