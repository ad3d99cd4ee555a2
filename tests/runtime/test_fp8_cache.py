"""FP8 (e4m3) KV caches on the CPU: the float64 reference dequantizes them with their scales, and a bad scale or cache
is refused with a message naming the argument (the planner's checks, which the kernels run too)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402

B, H_KV, GROUP, T, D = 2, 2, 4, 40, 64


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H_KV * GROUP, D, generator=gen).to(torch.bfloat16)
    k, v = (torch.randn(B, H_KV, T, D, generator=gen).mul(4).to(torch.float8_e4m3fn) for _ in range(2))
    lens = torch.tensor([T, 17], dtype=torch.int32)
    return q, k, v, lens


@pytest.mark.parametrize("form", ["none", "float", "0-d", "per-head"])
def test_reference_dequantizes_with_each_form_of_scale(form):
    q, k, v, lens = _inputs()
    per_head = torch.tensor([0.25, 0.125])
    given = {"none": (None, None), "float": (0.25, 2.0), "0-d": (torch.tensor(0.25), torch.tensor(2.0)),
             "per-head": (per_head, per_head * 8)}[form]
    got = cukiln.reference.decode_attention(q, k, v, lens, k_scale=given[0], v_scale=given[1])
    factors = [1.0 if s is None else (s.double().reshape(1, -1, 1, 1) if isinstance(s, torch.Tensor) else s)
               for s in given]
    # the same attention over the dequantized caches given in float64
    want = cukiln.reference.decode_attention(q.double(), k.double() * factors[0], v.double() * factors[1], lens)
    assert torch.equal(got, want)


@pytest.mark.parametrize("k_scale, error, words", [
    (torch.tensor([1.0, 2.0, 3.0]), ValueError, "k_scale: expected a 0-d tensor"),
    (torch.tensor(1.0, dtype=torch.float16), TypeError, "k_scale: expected float32"),
    (0.0, ValueError, "k_scale: expected a positive finite scale"),
    (-2.0, ValueError, "k_scale: expected a positive finite scale"),
    (math.inf, ValueError, "k_scale: expected a positive finite scale"),
    (math.nan, ValueError, "k_scale: expected a positive finite scale"),
    ("2", TypeError, "k_scale"),
])
def test_bad_scales_are_refused_naming_the_argument(k_scale, error, words):
    q, k, v, lens = _inputs()
    with pytest.raises(error, match=words):
        cukiln.reference.decode_attention(q, k, v, lens, k_scale=k_scale)


def test_scales_with_caches_of_q_dtype_are_refused():
    q, k, v, lens = _inputs()
    with pytest.raises(ValueError, match="v_scale: a scale dequantizes an FP8 cache"):
        cukiln.reference.decode_attention(q, k.bfloat16(), v.bfloat16(), lens, v_scale=2.0)


def test_fp8_caches_refuse_what_the_kernels_cannot_read():
    q, k, v, lens = _inputs()
    with pytest.raises(TypeError, match="q: expected float16 or bfloat16"):
        cukiln.reference.decode_attention(q.float(), k, v, lens)
    with pytest.raises(TypeError, match="k_cache, v_cache: expected one dtype for both"):
        cukiln.reference.decode_attention(q, k, v.bfloat16(), lens)
    wide = torch.zeros(B, H_KV, T, 2 * D, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="k_cache: an FP8 cache needs a contiguous head dim"):
        cukiln.reference.decode_attention(q, wide[..., ::2], v, lens)
    odd = torch.zeros(B, H_KV, T, 80, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=r"k_cache: FP8 caches serve head dims"):
        cukiln.reference.decode_attention(torch.zeros(B, H_KV * GROUP, 80, dtype=torch.bfloat16), odd, odd, lens)


def test_kv_scales_keep_every_value_in_range_per_head_or_overall():
    gen = torch.Generator().manual_seed(3)
    k = torch.randn(3, 4, 50, 64, generator=gen) * torch.tensor([1.0, 10.0, 0.0, 1e3]).view(1, 4, 1, 1)
    scales = cukiln.kv_scales(k)
    assert scales.dtype == torch.float32 and scales.shape == (4,)
    assert scales[2] == 1.0  # an all-zero head
    amax = k.abs().amax(dim=(0, 2, 3))
    assert torch.allclose(scales[[0, 1, 3]], (amax / 448)[[0, 1, 3]])
    stored = (k / scales.view(1, 4, 1, 1)).to(torch.float8_e4m3fn).float()
    assert stored.isfinite().all() and stored.abs().max() <= 448
    assert cukiln.kv_scales(k.transpose(1, 2), head_axis=2).equal(scales)
    overall = cukiln.kv_scales(k, per_head=False)
    assert overall.shape == () and overall == amax.max() / 448
    with pytest.raises(ValueError, match="x: holds non-finite values"):
        cukiln.kv_scales(torch.tensor([[1.0, float("nan")]]), head_axis=0)
    with pytest.raises(TypeError, match="x: expected a floating-point"):
        cukiln.kv_scales(torch.ones(2, 2, dtype=torch.int32))


def test_an_append_with_a_bad_scale_writes_nothing():
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, h, D, generator=gen).to(torch.bfloat16) for h in (H_KV * GROUP, H_KV, H_KV))
    caches = [torch.randn(B, H_KV, T, D, generator=gen).to(torch.float8_e4m3fn) for _ in range(2)]
    before = [c.view(torch.uint8).clone() for c in caches]
    for bad, error in ((torch.ones(3), ValueError), (float("nan"), ValueError), (-1.0, ValueError),
                       (torch.ones(H_KV, dtype=torch.float64).half(), TypeError)):
        with pytest.raises(error, match="v_scale"):
            cukiln.reference.kv_append(q, k, v, *caches, 5, base=1e4, v_scale=bad)
        assert all(torch.equal(c.view(torch.uint8), b) for c, b in zip(caches, before))
    cukiln.reference.kv_append(q, k, v, *caches, 5, base=1e4, k_scale=torch.full((H_KV,), 0.5), v_scale=2.0)
    assert torch.equal(caches[1][:, :, 5].float(), (v.double() / 2.0).clamp(-448, 448).to(torch.float8_e4m3fn).float())
