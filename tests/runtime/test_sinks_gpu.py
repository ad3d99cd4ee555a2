"""Attention sinks on the GPU: decode_attention (fixed and paged caches, FP8, every split mode), decode_step and
merge_attention with sinks from large negative to large positive, NaN-poisoned outputs, against the float64
references; a row without keys gives zeros and the sink as its lse."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import cukiln  # noqa: E402
from cukiln.tools.decode.checks import check_lse, decode_cache_view, paged_copy  # noqa: E402
from cukiln.tools.verify import compare  # noqa: E402

H_KV, GROUP, D = 2, 6, 128


def _sinks(gen):
    return torch.cat((torch.tensor([-1e4, 40.0, -40.0, 0.0], device="cuda"),
                      torch.randn(H_KV * GROUP - 4, generator=gen, device="cuda") * 4))


@pytest.mark.parametrize("form", ["fixed", "paged", "fp8"])
@pytest.mark.parametrize("num_splits", [None, 1, 4, 20])
def test_decode_with_sinks_matches_the_reference(form, num_splits):
    gen = torch.Generator("cuda").manual_seed(11)
    b, T = 4, 600
    q = torch.randn(b, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    dtype = torch.float8_e4m3fn if form == "fp8" else torch.bfloat16
    k, v = (decode_cache_view(b, H_KV, T, D, dtype, gen, capacity=T) for _ in range(2))
    extra = {"k_scale": 2.0 ** -7, "v_scale": 0.5} if form == "fp8" else {}
    lens = torch.tensor([T, 0, 1, 301], dtype=torch.int32, device="cuda")
    sinks = _sinks(gen)
    kc, vc = k, v
    if form == "paged":
        (kc, vc), table = paged_copy((k, v), 16, gen=gen)
        extra["block_table"] = table
    out = torch.full_like(q, float("nan"))
    got, lse = cukiln.decode_attention(q, kc, vc, lens, sinks=sinks, num_splits=num_splits, out=out, return_lse=True,
                                       **extra)
    extra.pop("block_table", None)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, sinks=sinks, return_lse=True, **extra)
    assert got is out
    assert compare(out, ref, fp32_units=64) is None and check_lse(lse, ref_lse) is None
    assert torch.equal(out[1], torch.zeros_like(out[1])) and torch.equal(lse[1], sinks)


def test_merge_with_sinks_and_a_step_with_sinks():
    gen = torch.Generator("cuda").manual_seed(12)
    sinks = _sinks(gen)
    outs = torch.randn(3, 2, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    lses = torch.randn(3, 2, H_KV * GROUP, generator=gen, device="cuda") * 5
    lses[:, 1] = float("-inf")
    got, lse = cukiln.merge_attention(outs, lses, sinks=sinks, return_lse=True)
    ref, ref_lse = cukiln.reference.merge_attention(outs, lses, sinks=sinks, return_lse=True)
    assert compare(got, ref) is None and check_lse(lse, ref_lse) is None
    b, T = 3, 256
    q = torch.randn(b, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    k_new, v_new = (torch.randn(b, H_KV, D, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, H_KV, T, D, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([0, 100, 200], dtype=torch.int32, device="cuda")
    want = cukiln.reference.decode_step(q, k_new, v_new, k.clone(), v.clone(), lens.clone(), base=1e4, sinks=sinks)
    got = cukiln.decode_step(q, k_new, v_new, k, v, lens, base=1e4, sinks=sinks)
    assert compare(got, want) is None
