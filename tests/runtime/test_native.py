"""The native hot path's descriptions, checked on the CPU: replaying a description the way hot_path.cpp does (the
template's bytes, this call's pointers and lengths written at their offsets) must give, byte for byte, the
parameter struct the Python path hands the kernel for the same call; and a description must decline what it
cannot serve. The C++ side itself runs in the GPU tests (every torch-op test goes through it there)."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import struct
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
import cukiln.torch  # noqa: E402,F401  (registers the ops)
from cukiln import calls, decode_api, decode_step_api, kv_append_api, native, overrides, rope_api  # noqa: E402

from .test_call_path import stub_device  # noqa: E402


class _Bound:
    """Stands in for launch.Kernel: what a description reads of one, and each call's packed parameters."""

    def __init__(self, log, symbol, fmt, grid, block, shared=0, overlap_previous=False, cluster=1):
        self.log, self.symbol, self.packer = log, symbol, struct.Struct(fmt)
        self.grid, self.block, self.shared, self.cluster = grid, block, shared, cluster
        self.overlap_previous, self.function, self.context = overlap_previous, 0x1000 + len(log), 0x2000

    def __call__(self, values, stream):
        self.log.append((self.symbol, self.packer.pack(*values)))


@pytest.fixture
def launches(monkeypatch):
    log = []
    stub_device(monkeypatch.setattr, lambda device, module, symbol, fmt, grid, block, *rest:
                _Bound(log, symbol, fmt, grid, block, *rest))
    return log


def _scratch_offsets(description: dict) -> list:
    """Where hot_path.cpp lays each scratch tensor in the call's one scratch allocation, and its size, last."""
    offsets = [0]
    for shape, strides, dtype in description["scratch"]:
        size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        nbytes = size * {native.UINT8: 1, 3: 4, 4: 8, 5: 2, 6: 4, 15: 2}[dtype]
        offsets.append(offsets[-1] + (nbytes + 255) // 256 * 256)
    return offsets


def _replay(description: dict, args: tuple, outputs=(), scratch=None, variant=False) -> list:
    """Each launch's parameter bytes as hot_path.cpp builds them for a call with these op arguments (after the C++
    side has accepted the description, where the extension builds); ``scratch`` the call's one scratch allocation."""
    if native.module() is not None:
        returned = len(description["returns"])
        native.module().check_description(description, len(args), returned, variant)
    offsets = _scratch_offsets(description)

    def pointer(source, index):
        if source == native.SCRATCH:
            return scratch.data_ptr() + offsets[index]
        t = (args, outputs)[source][index]
        return 0 if t is None or type(t) is int else t.data_ptr()

    built = []
    for launch in description["launches"]:
        params = bytearray(launch["params"])
        for offset, source, index, add in launch["pointers"]:
            struct.pack_into("<q", params, offset, pointer(source, index) + add)
        for offset, argument in launch["integers"]:
            struct.pack_into("<q", params, offset, args[argument])
        if launch["maps"] is not None:
            offsets, arguments, encode = launch["maps"]
            for offset, encoded in zip(offsets, encode(tuple(pointer(0, a) for a in arguments))):
                params[offset:offset + len(encoded)] = encoded
        built.append((launch["symbol"], bytes(params)))
    return built


def _call(runtime, *args, **kw):
    """(op arguments, form, the outputs given) of a public-style call of ``runtime``'s op."""
    return calls.bind_arguments(runtime)(*args, **kw)


def _op_args(x, **kw) -> tuple:
    """rope's op arguments for cukiln.rope(x, **kw)."""
    return _call(rope_api.RUNTIME, x, **kw)[0]


def _described(runtime, *args, **kw):
    """A call's miss as the native path makes it: (its result, its description), the call run (its launch
    recorded)."""
    op_args, form, extras = _call(runtime, *args, **kw)
    result, description = runtime.miss(form)(*op_args, *extras)
    return result, description, form


def _again(runtime, *args, **kw):
    """The same call run again through the Python path (another plan of the same metadata, or the cached one):
    (its full arguments, its outputs as the description numbers them, its result)."""
    op_args, form, extras = _call(runtime, *args, **kw)
    runtime.plans.clear()
    plan = runtime.plan(op_args, form, extras)
    returned = plan.run(op_args + extras)
    outputs = [None] * len(plan.outputs)  # each allocated output is returned: where the plan numbers it
    for r, value in zip(plan.returns, returned):
        if r is not None and r >= 0:
            outputs[r] = value
    return op_args + extras, tuple(outputs), returned


def test_field_offsets_follow_the_struct_format():
    assert native.field_offsets("<QQqd") == [0, 8, 16, 24]
    assert native.field_offsets("<128s128sQq32x") == [0, 128, 256, 264]


def _replayed_equals_run(runtime, launches, args, kw, second_args, variant=False, scratch=True):
    """The description of a call replayed the C++ way on a second call's arguments gives the bytes the Python replay
    of the same plan launched for that call."""
    _, description, _ = _described(runtime, *args, **kw)
    full, outputs, _ = _again(runtime, *second_args, **kw)
    count = len(description["launches"])
    space = torch.empty(max(_scratch_offsets(description)[-1], 1), dtype=torch.uint8)
    replayed = _replay(description, full, outputs, space, variant=variant)
    assert _masked(description, replayed) == _masked(description, launches[-count:])
    return description


@pytest.mark.parametrize("inplace", [True, False])
def test_a_rope_description_replays_the_python_paths_parameters(launches, inplace):
    kw = dict(freqs=torch.rand(64, 32), layout="bshd", rotary_dim=32, rotary_offset=16, mscale=1.5, inplace=inplace)
    x, x2 = (torch.randn(2, 5, 4, 64, dtype=torch.bfloat16) for _ in range(2))
    description = _replayed_equals_run(rope_api.RUNTIME, launches, (x,), kw, (x2,))
    assert description["returns"] == ([] if inplace else [0])
    assert description["bumps"] == ([0] if inplace else [])


def test_a_rope_qk_description_replays_both_launches_of_strided_heads(launches):
    # last dims with a stride of 2: no _qk kernel serves them, so q and k launch one after the other
    def qk():
        return (torch.randn(6, 2, 4, 128, dtype=torch.float16)[..., ::2],
                torch.randn(6, 2, 2, 128, dtype=torch.float16)[..., ::2])

    kw = dict(base=500000.0, positions=torch.arange(6))
    description = _replayed_equals_run(rope_api.QK_RUNTIME, launches, qk(), kw, qk())
    assert len(description["launches"]) == 2 and description["returns"] == [0, 1]


def test_host_cu_seqlens_are_not_described(launches):
    x = torch.randn(30, 4, 64, dtype=torch.float16)
    # the call's cu_seqlens on the host: its values are checked per call, which a description cannot do
    _, description, _ = _described(rope_api.RUNTIME, x, base=10000.0, layout="thd",
                                   cu_seqlens=torch.tensor([0, 10, 30], dtype=torch.int32))
    assert description is None


@pytest.mark.parametrize("pipeline", ["narrow", "ws", "ws_deep"])
def test_a_decode_description_replays_lengths_and_maps(launches, pipeline):
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 256, 128, dtype=torch.bfloat16) for _ in range(2))
    with overrides.forced("decode_pipeline", pipeline):
        _, description, _ = _described(decode_api.RUNTIME, q, k, v, 100, kv_start=3, softcap=30.0, return_lse=True)
        length, start = decode_api.SCHEMA.int_index("kv_lens"), decode_api.SCHEMA.int_index("kv_start")
        assert description["bounds"] == [(length, 0, 256), (start, 0, 2 ** 62)]
        assert description["ordered"] == [(start, length)]
        assert description["scratch"] == [] and description["returns"] == [0, 1]
        for launch in description["launches"]:
            assert (launch["maps"] is not None) == (pipeline != "narrow" and launch is description["launches"][0])
        # another call: other caches and lengths, the same metadata
        k2, v2 = torch.randn_like(k), torch.randn_like(v)
        full, outputs, _ = _again(decode_api.RUNTIME, q, k2, v2, 77, kv_start=5, softcap=30.0, return_lse=True)
    replayed = _replay(description, full, outputs)
    assert replayed == launches[-len(replayed):]


def test_a_decode_description_of_a_split_merge_allocates_its_workspace(launches):
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 256, 128, dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((2,), 100, dtype=torch.int32)
    # 16 splits merge in the combine kernel, through a workspace of partial results allocated per call
    with pytest.MonkeyPatch.context() as patch:  # a device tensor of lengths, as the stub sees one
        patch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))
        _, description, _ = _described(decode_api.RUNTIME, q, k, v, lens, num_splits=16, return_lse=True)
    if native.module() is not None:  # the C++ side accepts it (slots within the struct, sources it allocates)
        native.module().check_description(description, 12, 2)
    attention, combine = description["launches"]
    assert [(shape, dtype) for shape, _, dtype in description["scratch"]] == [((2, 8, 16, 128), 6), ((2, 8, 16), 6)]
    for launch in (attention, combine):
        assert {index for _, source, index, _ in launch["pointers"] if source == native.SCRATCH} == {0, 1}
    lens_at, start = decode_api.RUNTIME.index["kv_lens"], decode_api.SCHEMA.int_index("kv_start")
    assert (native.ARGUMENT, lens_at) in [(s, i) for _, s, i, _ in attention["pointers"]], "lengths by pointer"
    # kv_start is the op's int (0 here), refilled per call; kv_lens comes by pointer
    assert [a for _, a in attention["integers"]] == [start] and description["bounds"] == [(start, 0, 2 ** 62)]


def test_decode_lengths_in_host_tensors_are_not_described(launches):
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 256, 128, dtype=torch.bfloat16) for _ in range(2))
    lens = torch.tensor([100, 7], dtype=torch.int32)
    assert _described(decode_api.RUNTIME, q, k, v, lens, return_lse=True)[1] is None


def test_forcing_an_override_tells_its_listeners(monkeypatch):
    heard = []
    monkeypatch.setattr(overrides, "_LISTENERS", [])
    overrides.on_change(lambda: heard.append(overrides.CURRENT["decode_pipeline"]))
    before = overrides.CURRENT["decode_pipeline"]
    with overrides.forced("decode_pipeline", "deep"):
        pass
    assert heard == ["deep", before]
    # a plain write too (a test's monkeypatch.setitem): the plans made under the old value must not serve the new
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", "wide")
    assert heard == ["deep", before, "wide"]


def test_an_override_written_drops_the_python_plans(launches):
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    args, form, extras = _call(rope_api.RUNTIME, x, base=1e4, inplace=True)
    rope_api.RUNTIME.run(args, form, extras)
    assert len(rope_api.RUNTIME.plans) >= 1
    with overrides.forced("decode_pipeline", "deep"):
        assert len(rope_api.RUNTIME.plans) == 0


@pytest.mark.skipif(native.module() is None, reason="the native hot path is off")
def test_an_override_written_drops_the_native_plans(launches, monkeypatch):
    from cukiln.torch_support import NATIVE_HANDLES

    # the listener the extension registers when it loads (native.module): a plan kept under one value is gone
    # after any write, forced() or a plain one, so that no call under the new value hits it
    call = native.caller(NATIVE_HANDLES["rope_"])
    args = _op_args(torch.randn(4, 1, 2, 64, dtype=torch.float16), base=1e4)
    call(*args)
    assert native.module().plan_count("rope_") >= 1
    with overrides.forced("decode_pipeline", "deep"):
        assert native.module().plan_count("rope_") == 0
    call(*args)
    assert native.module().plan_count("rope_") >= 1
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", "wide")
    assert native.module().plan_count("rope_") == 0


def _passes(description: dict, args: tuple) -> bool:
    """hot_path.cpp's per-call checks (passes()), on op arguments."""
    for argument, lo, hi in description["bounds"]:
        if not lo <= args[argument] <= hi:
            return False
    if any(args[a] > args[b] for a, b in description["ordered"]):
        return False
    for w, c, w_lo, w_hi, c_lo, c_hi, modulus, lo, hi in description["overlaps"]:
        pw, pc = args[w].data_ptr(), args[c].data_ptr()
        if pw + w_lo < pc + c_hi and pc + c_lo < pw + w_hi and (modulus == 0 or not lo <= (pc - pw) % modulus <= hi):
            return False
    return True


def test_q_and_k_slices_of_one_projection_are_served_with_their_window(launches):
    def qk(qkv):
        return qkv[:, :4096].view(16, 32, 128), qkv[:, 4096:5120].view(16, 8, 128)

    kw = dict(cos_sin_cache=torch.randn(4096, 128), positions=torch.arange(16), layout="thd", inplace=True)
    q, k = qk(torch.randn(16, 48 * 128, dtype=torch.bfloat16))
    _, description, _ = _described(rope_api.QK_RUNTIME, q, k, **kw)
    assert description is not None and any(o[6] > 0 for o in description["overlaps"]), "q and k interleave"
    q2, k2 = qk(torch.randn(16, 48 * 128, dtype=torch.bfloat16))
    full, outputs, _ = _again(rope_api.QK_RUNTIME, q2, k2, **kw)
    assert _passes(description, full)
    assert _replay(description, full, outputs) == launches[-1:]
    # the same metadata with k over q's own bytes: the check fails, so the call goes back to Python (which raises)
    clash = q2.reshape(16, -1)[:, 1024:2048].view(16, 8, 128)
    args, form, _ = _call(rope_api.QK_RUNTIME, q2, clash, **kw)
    assert not _passes(description, args)
    with pytest.raises(ValueError, match="overlaps"):
        rope_api.QK_RUNTIME.run(args, form)


def _masked(description: dict, built: list) -> list:
    """Launch parameters with the scratch pointers zeroed: the Python path and a replay each allocate their own."""
    out = []
    for launch, (symbol, params) in zip(description["launches"], built):
        params = bytearray(params)
        for offset, source, _, _ in launch["pointers"]:
            if source == native.SCRATCH:
                params[offset:offset + 8] = bytes(8)
        out.append((symbol, bytes(params)))
    return out


def _step_tensors(b=2, hq=8, hkv=2, T=64, d=128):
    q = torch.randn(b, hq, d, dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, d, dtype=torch.bfloat16) for _ in range(2))
    caches = [torch.randn(b, hkv, T, d, dtype=torch.bfloat16) for _ in range(2)]
    return q, k, v, *caches, torch.full((b,), 17, dtype=torch.int32), torch.rand(T, d)


def test_a_kv_append_description_replays_the_python_paths_parameters(launches):
    with pytest.MonkeyPatch.context() as patch:  # device lengths, as the stub sees them
        patch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))
        *first, table = _step_tensors()
        *second, _ = _step_tensors()
        description = _replayed_equals_run(kv_append_api.RUNTIME, launches, first, dict(kv_start=3, cos_sin_cache=table),
                                           second)
    index = kv_append_api.RUNTIME.index
    assert description["returns"] == [0] and description["bumps"] == [index["k_cache"], index["v_cache"]]


def test_kv_append_int_lengths_are_refilled_per_call_within_the_checked_bounds(launches):
    q, k, v, kc, vc, _, table = _step_tensors()  # a cache of 64 slots, a table of 64 rows
    _, description, _ = _described(kv_append_api.RUNTIME, q, k, v, kc, vc, 17, kv_start=2, cos_sin_cache=table)
    length, start = kv_append_api.SCHEMA.int_index("kv_lens"), kv_append_api.SCHEMA.int_index("kv_start")
    assert [a for _, a in description["launches"][0]["integers"]] == [length, start], "kv_len and kv_start refilled"
    assert description["bounds"] == [(length, 0, 63), (start, 0, 2 ** 62)] and description["ordered"] == [(start,
                                                                                                          length)]
    full, outputs, _ = _again(kv_append_api.RUNTIME, *_step_tensors()[:5], 40, kv_start=5, cos_sin_cache=table)
    assert _replay(description, full, outputs) == launches[-1:], "another length, another start: one plan"
    assert _passes(description, full)
    for bad_length, bad_start in ((64, 0), (10, 11), (-1, 0)):  # past the cache, a start past the length, negative
        args, form, _ = _call(kv_append_api.RUNTIME, *_step_tensors()[:5], bad_length, kv_start=bad_start,
                              cos_sin_cache=table)
        assert not _passes(description, args)
        with pytest.raises(ValueError, match="kv_lens"):
            kv_append_api.RUNTIME.run(args, form)


@pytest.mark.parametrize("inplace, given_out", [(True, False), (False, True)])
def test_kv_append_variants_take_the_callers_tensors_as_arguments(launches, inplace, given_out):
    with pytest.MonkeyPatch.context() as patch:  # device lengths, as the stub sees them
        patch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))
        *first, table = _step_tensors()
        out = torch.empty_like(first[0]) if given_out else None
        lens_out = torch.empty_like(first[5])
        kw = dict(kv_start=3, cos_sin_cache=table, inplace=inplace, out=out, kv_lens_out=lens_out)
        result, description, form = _described(kv_append_api.RUNTIME, *first, **kw)
        *second, _ = _step_tensors()
        kw2 = dict(kw, out=torch.empty_like(second[0]) if given_out else None, kv_lens_out=torch.empty_like(second[5]))
        full, outputs, _ = _again(kv_append_api.RUNTIME, *second, **kw2)
    count = len(kv_append_api.SCHEMA.op_arguments())
    q_out_at = 0 if inplace else count
    index = kv_append_api.RUNTIME.index
    assert result is (first[0] if inplace else out) and description["outputs"] == []
    assert description["returns"] == [-1 - q_out_at]
    assert sorted(description["bumps"]) == sorted([index["k_cache"], index["v_cache"], q_out_at,
                                                   count + given_out]), "caches, the query's output, new lengths"
    assert _replay(description, full, outputs, variant=True) == launches[-1:]
    if given_out:  # the caller's out is checked against what the kernel reads
        assert not _passes(description, full[:count] + (full[0], full[-1]))


@pytest.mark.parametrize("launch", ["fused", "separate"])
def test_a_decode_step_description_replays_the_append_and_the_attention(launches, monkeypatch, launch):
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))  # device lengths, as the stub sees them
    with overrides.forced("decode_step_launch", launch):
        *first, table = _step_tensors()
        *second, _ = _step_tensors()
        kw = dict(cos_sin_cache=table, return_lse=True)
        description = _replayed_equals_run(decode_step_api.RUNTIME, launches, first, kw, second)
        index = decode_step_api.RUNTIME.index
        assert description["bumps"] == [index["k_cache"], index["v_cache"]]
        symbols = [d["symbol"] for d in description["launches"]]
        if launch == "fused":  # the step's shapes (GQA 4, d 128, bf16, sm_90) have a fused kernel: one launch
            assert symbols == ["decode_step_bf16_d128_half_any"] and description["scratch"] == []
        else:
            assert symbols[0].startswith("kv_append_") and symbols[1].startswith("decode_"), "append, attention"
        # advancing kv_lens is a step after the kernels, which only the Python path makes
        assert _described(decode_step_api.RUNTIME, *_step_tensors()[:6], cos_sin_cache=table,
                          advance_lens=True)[1] is None


def test_a_rope_out_description_takes_the_callers_out_as_an_argument(launches):
    kw = dict(freqs=torch.rand(64, 32), layout="bshd", rotary_dim=32, rotary_offset=16)
    x = torch.randn(2, 5, 4, 64, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    result, description, _ = _described(rope_api.RUNTIME, x, out=out, **kw)
    given = len(rope_api.SCHEMA.op_arguments())
    assert result is out and description["outputs"] == [] and description["returns"] == [-1 - given]
    assert description["bumps"] == [given], "the caller's out is written behind autograd's back: its version bumps"
    assert any(o[0] == given for o in description["overlaps"]), "out is checked against what the kernel reads"
    full, outputs, _ = _again(rope_api.RUNTIME, x, out=torch.empty_like(x), **kw)
    assert _replay(description, full, outputs) == launches[-1:]
    assert _passes(description, full)
    base = torch.empty(2 * x.numel(), dtype=x.dtype)  # an x and an out that share half their bytes
    x_shared, out_shared = base[:x.numel()].view_as(x), base[x.numel() // 2:][:x.numel()].view_as(x)
    assert not _passes(description, (x_shared,) + full[1:-1] + (out_shared,)), "an out over x fails the check"
    # an out at x's own address reads as in place to the Python path, which then checks nothing against x
    assert _described(rope_api.RUNTIME, x, out=x, **kw)[1] is False, "kept as no plan, so other outs stay native"


def test_a_decode_out_description_takes_the_callers_out_as_an_argument(launches):
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 256, 128, dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty_like(q)
    (result, lse), description, _ = _described(decode_api.RUNTIME, q, k, v, 100, out=out, return_lse=True)
    given = len(decode_api.SCHEMA.op_arguments())
    assert result is out and description["returns"] == [-1 - given, 0] and description["bumps"] == [given]
    assert {o[1] for o in description["overlaps"] if o[0] == given} >= {0, 1, 2}, "out against q, k and v"
    full, outputs, _ = _again(decode_api.RUNTIME, q, k, v, 100, out=torch.empty_like(q), return_lse=True)
    assert _replay(description, full, outputs, variant=True) == launches[-len(description["launches"]):]
    assert _passes(description, full)
    assert not _passes(description, full[:-1] + (q,)), "an out over q fails the check, so Python raises"


@pytest.mark.parametrize("given_out", [False, True])
def test_a_decode_variant_without_lse_allocates_and_returns_none_for_it(launches, given_out):
    q = torch.randn(2, 8, 128, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 256, 128, dtype=torch.bfloat16) for _ in range(2))
    (result, lse), description, _ = _described(decode_api.RUNTIME, q, k, v, 100,
                                                out=torch.empty_like(q) if given_out else None)
    count = len(decode_api.SCHEMA.op_arguments())
    assert lse is None and description["returns"] == ([-1 - count] if given_out else [0]) + [native.NOTHING]
    assert len(description["outputs"]) == (0 if given_out else 1), "no lse allocated"
    full, outputs, _ = _again(decode_api.RUNTIME, q, k, v, 100, out=torch.empty_like(q) if given_out else None)
    replayed = _replay(description, full, outputs, variant=True)
    assert replayed == launches[-len(description["launches"]):], "the lse pointer stays null, as the Python path's"
    if native.module() is not None:  # only a variant may return nothing in a result's place
        with pytest.raises(RuntimeError, match="return is in range"):
            native.module().check_description(description, len(full), 2, False)


def test_a_decode_step_variant_without_lse_replays_the_python_paths_parameters(launches, monkeypatch):
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))
    *first, table = _step_tensors()
    *second, _ = _step_tensors()
    description = _replayed_equals_run(decode_step_api.RUNTIME, launches, first, dict(cos_sin_cache=table), second,
                                       variant=True)
    assert description["returns"] == [0, native.NOTHING] and len(description["outputs"]) == 1


@pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None, reason="no C++ compiler or ninja")
def test_the_native_hot_path_builds_where_a_compiler_is():
    # a failed build only turns the native path off (the ops keep their Python kernels): here it must not fail
    assert os.environ.get("CUKILN_NATIVE", "1") == "0" or native.module() is not None


_IMPORT_WITHOUT_COMPILING = """
import os, sys
from pathlib import Path
import torch.utils.cpp_extension as cpp_extension
def refuse(*args, **kwargs):
    raise AssertionError("compiled")
cpp_extension.load = refuse
from cukiln import native
native.PACKAGED = Path(sys.argv[1])
loaded = native.module()
assert loaded is not None, native.off_reason()
assert Path(loaded.__file__).is_relative_to(sys.argv[1]), loaded.__file__
assert not os.listdir(os.environ["CUKILN_CACHE_DIR"]), "the user cache was written"
print("ok")
"""


@pytest.mark.skipif(native.module() is None, reason="the native hot path is off")
def test_a_wheels_native_build_is_imported_as_it_is(tmp_path):
    """The extension copied into a package's native/ folder, as setup.py copies it into a wheel: a process whose
    cache is empty imports that copy, with cpp_extension's compile out of reach: a wheel needs no compiler, no ninja."""
    import torch

    packaged = tmp_path / "cukiln" / "native" / native.build_name(torch)
    packaged.mkdir(parents=True)
    shutil.copy2(native.module().__file__, packaged)
    (tmp_path / "cache").mkdir()
    env = {**os.environ, "CUKILN_CACHE_DIR": str(tmp_path / "cache"), "CUKILN_NATIVE": "1"}
    done = subprocess.run([sys.executable, "-c", _IMPORT_WITHOUT_COMPILING, str(tmp_path / "cukiln" / "native")],
                          capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.skipif(native.module() is None, reason="the native hot path is off")
def test_a_native_call_runs_the_miss_and_keeps_its_plan(launches):
    from cukiln.torch_support import NATIVE_HANDLES

    call = native.caller(NATIVE_HANDLES["rope_"])
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    args = _op_args(x, base=10000.0)
    before = native.module().plan_count("rope_")
    assert call(*args) is None and len(launches) == 1, "the miss ran the Python path (its launch recorded)"
    assert native.module().plan_count("rope_") == before + 1, "and its description became a C++ plan"
    # validation errors come back through the C++ call as they are raised in Python
    with pytest.raises(ValueError, match="rotary_dim"):
        call(*_op_args(x, base=10000.0, rotary_dim=65))


@pytest.mark.skipif(native.module() is None or ctypes.util.find_library("cuda") is not None,
                    reason="the native hot path is off, or a driver would launch on a hit")
def test_native_calls_convert_scalars_as_the_schema_types_them(launches):
    from cukiln.torch_support import NATIVE_HANDLES

    call = native.caller(NATIVE_HANDLES["rope_"])
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    call(*_op_args(x, base=20000.0, rope_scale=1.0, interleaved=True))
    before = native.module().plan_count("rope_")
    # base and rope_scale as ints, interleaved as a truth value: the same key as the floats and the bool, so this
    # call hits the plan just kept, and replaying it needs the driver, which this machine lacks
    i = rope_api.RUNTIME.index
    args = list(_op_args(x))
    args[i["base"]], args[i["rope_scale"]], args[i["interleaved"]] = 20000, 1, 1
    with pytest.raises(RuntimeError, match="libcuda"):
        call(*args)
    assert native.module().plan_count("rope_") == before
    with pytest.raises(TypeError, match="expected 23 arguments, got 2"):
        call(x, None)
    # a value not of the schema's type reaches the Python kernel as given, which explains it
    args = list(_op_args(x))
    args[i["positions"]] = 5
    with pytest.raises(TypeError, match="positions: expected a torch.Tensor"):
        call(*args)


@pytest.mark.skipif(native.module() is None or ctypes.util.find_library("cuda") is not None,
                    reason="the native hot path is off, or a driver would launch on a hit")
def test_a_plain_int_in_a_symint_slot_is_keyed_as_an_int(launches):
    from cukiln.torch_support import NATIVE_HANDLES

    # rope's offset is declared SymInt (a traced length stays a symbol); a caller's plain int is an int to the key,
    # so a second call hits the plan the first kept, and replaying it needs the driver, which this machine lacks
    assert "SymInt" in str(torch.ops.cukiln.rope_.default._schema)
    call = native.caller(NATIVE_HANDLES["rope_"])
    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    args = _op_args(x, base=10000.0, offsets=3)
    assert args[rope_api.SCHEMA.int_index("offsets")] == 3
    before, served = native.module().plan_count("rope_"), native.module().python_count("rope_")
    call(*args)
    assert native.module().plan_count("rope_") == before + 1, "the miss kept a plan for its key"
    with pytest.raises(RuntimeError, match="libcuda"):
        call(*args)
    assert native.module().plan_count("rope_") == before + 1
    assert native.module().python_count("rope_") == served + 1, "Python served the miss alone"


@pytest.mark.skipif(native.module() is None, reason="the native hot path is off")
def test_native_calls_keep_python_semantics_at_their_edges(launches):
    from cukiln.torch_support import NATIVE_HANDLES

    x = torch.randn(4, 1, 2, 64, dtype=torch.float16)
    # an int beyond int64 raises as Python's conversion does, instead of passing -1 on
    with pytest.raises(OverflowError):
        native.caller(NATIVE_HANDLES["rope_"])(*_op_args(x, base=10000.0, rotary_offset=2 ** 70))
    # an out= call whose out is x itself: run by Python, and no plan kept for its key (other outs stay native)
    before = native.module().plan_count("rope#out")
    assert cukiln.rope(x, base=10000.0, out=x) is x
    assert native.module().plan_count("rope#out") == before


@pytest.mark.skipif(native.module() is None, reason="the native hot path is off")
def test_registering_an_op_again_keeps_its_handle():
    from cukiln.torch_support import NATIVE_HANDLES

    handle = NATIVE_HANDLES["rope_"]
    mask = [a.name in () for a in torch.ops.cukiln.rope_.default._schema.arguments]
    form = rope_api.SCHEMA.op_forms()["rope_"]
    again = native.module().register_op("rope_", rope_api.RUNTIME.miss(form), lambda *args: None, mask, mask)
    assert again == handle, "handles given out stay valid"


def test_the_stage_names_match_the_stages_hot_path_times():
    # a timers build (CUKILN_NATIVE_TIMERS=1) reports one total per stage; native.STAGES names them in order
    import re

    source = native.SOURCE.read_text()
    (count,) = re.findall(r"constexpr size_t kStages = (\d+);", source)
    marked = sorted({int(i) for i in re.findall(r"STAGE\(state, (\d+)\)", source)})
    assert len(native.STAGES) == int(count) and marked == list(range(int(count)))


def test_a_timers_build_has_a_directory_of_its_own(monkeypatch):
    import torch

    plain = native._build_directory(torch)
    monkeypatch.setenv("CUKILN_NATIVE_TIMERS", "1")
    assert native._build_directory(torch) == plain.with_name(plain.name + "-stage-timers")
