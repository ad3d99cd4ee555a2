"""Decode attention over FP8 (e4m3) caches on the GPU against the float64 reference, which dequantizes the same bytes:
every form of scale, both layouts and query types, cache slices, split modes, CUDA graphs, and the NaN code. Every
manifest variant is also checked by test_decode_gpu.test_every_manifest_variant (random codes over the whole range).
Inputs are fresh random draws and outputs NaN-poisoned before each launch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln.decode_api import plan_call  # noqa: E402
from cukiln.tools.decode.checks import DECODE_FP32_UNITS, decode_cache_view, run_decode_and_compare  # noqa: E402
from cukiln.tools.verify import compare, new_generator  # noqa: E402

pytestmark = pytest.mark.gpu
E4M3 = torch.float8_e4m3fn


def _scales(form: str, h_kv: int):
    if form == "none":
        return {}
    if form == "float":
        return {"k_scale": 1 / 32, "v_scale": 3.0}
    if form == "0-d":
        return {"k_scale": torch.tensor(1 / 32, device="cuda"), "v_scale": torch.tensor(3.0, device="cuda")}
    per_head = torch.tensor([2.0 ** -(4 + i % 4) for i in range(h_kv)], device="cuda")
    return {"k_scale": per_head, "v_scale": per_head[:, None].expand(h_kv, 3)[:, 1] * 16}  # a strided [h_kv] view


@pytest.mark.parametrize("form", ["none", "float", "0-d", "per-head"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("num_splits", [1, 5, None])
def test_scales_layouts_and_splits(form, layout, dtype, num_splits):
    gen = new_generator()
    b, h_kv, group, T, d = 4, 4, 6, 700, 128
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(dtype)
    k, v = (decode_cache_view(b, h_kv, T, d, E4M3, gen, layout=layout, capacity=1024) for _ in range(2))
    lens = torch.tensor([T, 1, 0, 333], dtype=torch.int32, device="cuda")
    kwargs = dict(kv_layout=layout, num_splits=num_splits, **_scales(form, h_kv))
    assert plan_call(q, k, v, lens, **kwargs).key[5] == "e4m3"
    # unscaled keys up to 448 give logits of hundreds: their fp32 dot products are off by d x 2^-24 of the terms' sizes,
    # more than 1e-5 of a small log-sum-exp
    key_scale = kwargs.get("k_scale", 1.0)
    largest_key = 448 * float(key_scale.max() if isinstance(key_scale, torch.Tensor) else key_scale)
    lse_atol = 4 * d * 2.0 ** -24 * q.abs().max().item() * largest_key / d ** 0.5
    problem = run_decode_and_compare(q, k, v, lens, lse_atol=lse_atol, **kwargs)[0]
    assert problem is None, problem


def test_a_nan_code_in_the_keys_makes_its_row_nan_and_only_it():
    gen = new_generator()
    b, h_kv, T, d = 3, 2, 200, 64
    q = torch.randn(b, 8, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, E4M3, gen) for _ in range(2))
    k.view(torch.uint8)[1, 0, 57, 3] = 0x7F  # e4m3's NaN
    v.view(torch.uint8)[2, 1, 100, 9] = 0xFF  # and its negative
    out = cukiln.decode_attention(q, k, v, T, k_scale=1 / 64)
    assert out[1, :4].isnan().all() and out[2, 4:].isnan().any()
    assert not out[0].isnan().any() and not out[1, 4:].isnan().any() and not out[2, :4].isnan().any()


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("group", [4, 12])
def test_nan_codes_give_the_references_nans_and_nothing_else(d, group):
    # groups of 8 heads or fewer read the bytes into registers (attend_fp8_chunk, sm_90 on), larger ones widen them in
    # shared memory: a key's NaN poisons its KV head's rows, a value's NaN its column only, and a NaN code past a row's
    # length nothing
    _check_nan_codes(d, group)


@pytest.mark.parametrize("pipeline", ["narrow", "ws"])
def test_every_fp8_pipeline_keeps_nan_codes_to_their_rows(pipeline):
    # the ws kernels read the TMA engine's swizzled tiles, where rows past a split's keys hold the next split's bytes
    from cukiln.tools.decode.checks import forced_decode_pipeline

    if pipeline != "narrow" and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the ws pipelines need sm_90 or newer")
    with forced_decode_pipeline(pipeline):
        _check_nan_codes(128, 4)


def _check_nan_codes(d: int, group: int) -> None:
    gen = new_generator()
    b, h_kv, T = 3, 2, 300
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, E4M3, gen) for _ in range(2))
    lens = torch.tensor([T, 200, 150], dtype=torch.int32, device="cuda")
    k.view(torch.uint8)[1, 0, 57, 3] = 0x7F
    v.view(torch.uint8)[2, 1, 100, 9] = 0xFF
    k.view(torch.uint8)[2, 0, 170, 5] = 0x7F  # past row 2's 150 keys
    for splits in (1, 3):
        out = cukiln.decode_attention(q, k, v, lens, k_scale=1 / 64, num_splits=splits)
        ref = cukiln.reference.decode_attention(q, k, v, lens, k_scale=1 / 64)
        nan = ref.isnan()
        assert nan[1, :group].all() and nan[2, group:, 9].all() and int(nan.sum()) == group * d + group
        assert torch.equal(out.isnan(), nan), f"NaN where the reference has none, or none where it has, splits {splits}"
        problem = compare(out.masked_fill(nan, 0), ref.masked_fill(nan, 0), fp32_units=DECODE_FP32_UNITS)
        assert problem is None, f"splits {splits}: {problem}"


def test_graph_replay_reads_new_scales_and_lengths():
    gen = new_generator()
    b, h_kv, T, d = 2, 2, 512, 128
    q = torch.randn(b, 16, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, E4M3, gen) for _ in range(2))
    lens = torch.tensor([300, 12], dtype=torch.int32, device="cuda")
    k_scale, v_scale = torch.tensor([0.05, 0.02], device="cuda"), torch.tensor(0.5, device="cuda")
    out = torch.empty_like(q)
    cukiln.decode_attention(q, k, v, lens, k_scale=k_scale, v_scale=v_scale, out=out)  # planned before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cukiln.decode_attention(q, k, v, lens, k_scale=k_scale, v_scale=v_scale, out=out)
    for step in range(2):
        lens += 7
        k_scale.mul_(1.5)
        v_scale.add_(0.25)
        out.fill_(float("nan"))
        graph.replay()
        ref = cukiln.reference.decode_attention(q, k, v, lens, k_scale=k_scale, v_scale=v_scale)
        torch.testing.assert_close(out.double(), ref, atol=2e-2, rtol=2e-2, msg=f"replay {step}")


def _step_inputs(gen, b=4, hq=32, hkv=8, d=128, T=300):
    from cukiln.tools.decode.checks import random_e4m3

    q, k, v = (torch.randn(b, h, d, generator=gen, device="cuda").to(torch.bfloat16) for h in (hq, hkv, hkv))
    caches = [random_e4m3(b * hkv * T * d, gen).view(b, hkv, T, d) for _ in range(2)]
    angles = torch.arange(T, device="cuda", dtype=torch.float64)[:, None] * (
        1e4 ** (-torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d))
    table = torch.cat((angles.cos(), angles.sin()), dim=1).float()
    return q, k, v, caches, table


@pytest.mark.parametrize("launch", ["auto", "separate"])
def test_a_decode_step_over_fp8_caches_appends_quantized_keys_and_attends(launch, monkeypatch):
    from cukiln import overrides
    from cukiln.tools.decode.checks import DECODE_FP32_UNITS
    from cukiln.tools.kv_append.checks import e4m3_steps
    from cukiln.tools.verify import compare

    monkeypatch.setitem(overrides.CURRENT, "decode_step_launch", launch)
    gen = new_generator()
    q, k, v, (k_cache, v_cache), table = _step_inputs(gen)
    lens = torch.tensor([0, 10, 150, 299], dtype=torch.int32, device="cuda")
    scales = {"k_scale": torch.rand(8, generator=gen, device="cuda") * 0.05 + 0.01, "v_scale": 0.02}
    ref_caches = k_cache.clone(), v_cache.clone()
    ref = cukiln.reference.decode_step(q, k, v, *ref_caches, lens, cos_sin_cache=table, **scales)
    got = cukiln.decode_step(q, k, v, k_cache, v_cache, lens, cos_sin_cache=table, **scales)
    # the attention reads the keys as the kernel quantized them, the reference as it did: a step apart at most
    problem = compare(got, ref, fp32_units=DECODE_FP32_UNITS * 64)
    assert problem is None, problem
    for cache, want in zip((k_cache, v_cache), ref_caches):
        assert (e4m3_steps(cache) - e4m3_steps(want)).abs().max() <= 1


def test_fp8_append_saturates_and_keeps_nan():
    gen = new_generator()
    q, k, v, (k_cache, v_cache), table = _step_inputs(gen, b=2, hq=8, hkv=2, d=64, T=16)
    k[0, 0, :4] = torch.tensor([1e4, -1e4, float("inf"), float("nan")])  # past 448 x scale, inf, NaN
    v[1, 1, :3] = torch.tensor([3e3, -3e3, -500.0])
    cukiln.kv_append(q, k, v, k_cache, v_cache, 3, freqs=None, base=1e4, rotary_dim=16, rotary_offset=48,
                     k_scale=1.0, v_scale=2.0)
    codes_k, codes_v = k_cache.view(torch.uint8), v_cache.view(torch.uint8)
    # features outside the rotated span [48, 64) pass through unrotated: +-448 (0x7e / 0xfe) for +-1e4 and inf, NaN
    assert codes_k[0, 0, 3, :4].tolist() == [0x7E, 0xFE, 0x7E, 0x7F]
    assert codes_v[1, 1, 3, :3].tolist() == [0x7E, 0xFE, 0xF8]  # 1500, -1500 and -250 scaled: 448, -448, -256


def test_the_torch_op_compiles_over_fp8_caches_with_tensor_and_float_scales():
    import cukiln.torch as ct

    gen = new_generator()
    b, h_kv, T, d = 3, 2, 256, 128
    q = torch.randn(b, 8, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, E4M3, gen) for _ in range(2))
    lens = torch.tensor([256, 3, 100], dtype=torch.int32, device="cuda")
    k_scale = torch.tensor([0.01, 0.03], device="cuda")
    step = torch.compile(lambda q, k, v, lens, ks: ct.decode_attention(q, k, v, lens, k_scale=ks, v_scale=0.5),
                         fullgraph=True)
    want = cukiln.decode_attention(q, k, v, lens, k_scale=k_scale, v_scale=0.5)
    assert torch.equal(step(q, k, v, lens, k_scale), want)
