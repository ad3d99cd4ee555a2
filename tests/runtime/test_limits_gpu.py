"""Limits on the GPU: more packed sequences than a grid dimension holds, head dims at both ends, single
tokens and rows, and empty inputs (which return at once, launching nothing)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import launch, overrides, rope_api  # noqa: E402
from tests.checks import assert_matches_reference  # noqa: E402

from .test_decode_gpu import DECODE_FP32_UNITS  # noqa: E402

pytestmark = pytest.mark.gpu


def test_more_than_65535_packed_sequences_take_the_token_path(monkeypatch):
    lengths = [1 + i % 3 for i in range(70_001)]  # 70001 sequences: more than gridDim.y allows
    cu = torch.tensor([0] + lengths).cumsum(0).to(torch.int32).cuda()
    x = torch.randn(sum(lengths), 2, 64, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(4, 1, 1, 64, device="cuda") * 10
    plan, _ = rope_api.plan_call(x, freqs=freqs, layout="thd", cu_seqlens=cu, max_seqlen=3)
    assert plan.key[6] == "token"
    out = torch.full_like(x, float("nan"))
    cukiln.rope(x, freqs=freqs, layout="thd", cu_seqlens=cu, out=out)
    assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs, layout="thd", cu_seqlens=cu), "70001 seqs")
    monkeypatch.setitem(overrides.CURRENT, "rope_thd_dispatch", "grid")
    with pytest.raises(ValueError, match="at most 65535 sequences"):
        cukiln.rope(x, freqs=freqs, layout="thd", cu_seqlens=cu, max_seqlen=3)


@pytest.mark.parametrize("head_dim", [2, 1024])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_head_dims_at_both_ends(head_dim, interleaved):
    x = torch.randn(5, 3, 2, head_dim, device="cuda", dtype=torch.float16)
    for rd in sorted({2, head_dim}):
        freqs = torch.rand(5, 1, 1, rd, device="cuda") * 10
        for backward in (False, True):
            kw = dict(freqs=freqs, interleaved=interleaved, backward=backward)
            out = torch.full_like(x, float("nan"))
            cukiln.rope(x, out=out, **kw)
            assert_matches_reference(out, cukiln.reference.rope(x, **kw), f"d={head_dim} rd={rd}")


def test_decode_one_row_one_key():
    q = torch.randn(1, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 1, 1, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out, lse = cukiln.decode_attention(q, k, v, 1, return_lse=True)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, 1, return_lse=True)
    assert_matches_reference(out, ref, "one key", fp32_units=DECODE_FP32_UNITS)
    assert torch.allclose(lse.double(), ref_lse, rtol=1e-5, atol=1e-5)


def test_empty_inputs_return_at_once_and_launch_nothing(monkeypatch):
    def no_launch(*args, **kwargs):
        raise AssertionError("an empty input launched a kernel")

    monkeypatch.setattr(launch.Kernel, "__call__", no_launch)  # every launch goes through it
    assert cukiln.rope(torch.empty(0, 2, 4, 64, device="cuda"), base=10000.0).shape == (0, 2, 4, 64)
    assert cukiln.rope(torch.empty(8, 0, 4, 64, device="cuda"), base=10000.0, inplace=True).numel() == 0
    cu = torch.zeros(1, dtype=torch.int32, device="cuda")
    assert cukiln.rope(torch.empty(0, 4, 64, device="cuda"), base=10000.0, layout="thd", cu_seqlens=cu).numel() == 0
    q = torch.randn(0, 8, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(0, 2, 16, 64, device="cuda", dtype=torch.float16)
    out, lse = cukiln.decode_attention(q, k, k, 0, return_lse=True)
    assert out.shape == (0, 8, 64) and lse.shape == (0, 8)
