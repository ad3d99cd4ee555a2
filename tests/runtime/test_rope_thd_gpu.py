"""Packed sequences (thd) and context parallel on the GPU: token and grid dispatch bitwise equal, both
equal to the float64 reference, over sequence shapes, cp ranks, pairings, partial rotary and dtypes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import overrides  # noqa: E402
from cukiln.rope_api import plan_call  # noqa: E402
from tests.checks import assert_matches_reference, planned_afresh  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LENGTH_SETS = {
    "zero-length among others": (24, 0, 40, 0, 8),
    "single sequence": (96,),
    "two tokens (blocks under a warp)": (2,),
    "2401 short": tuple(8 * (1 + i % 4) for i in range(2401)),
}


def _run_both(x, monkeypatch, **kw):
    """Outputs of token and grid dispatch from NaN-poisoned buffers."""
    outs = {}
    for mode in ("token", "grid"):
        monkeypatch.setitem(overrides.CURRENT, "rope_thd_dispatch", mode)
        out = torch.full_like(x, float("nan"))
        plan, _ = plan_call(x, out=out, **kw)
        assert plan.key[6] == mode
        with planned_afresh("rope#out"):  # this mode's own plan, not the other mode's
            cukiln.rope(x, out=out, **kw)
        outs[mode] = out
    return outs


@pytest.mark.parametrize("lengths", LENGTH_SETS.values(), ids=LENGTH_SETS.keys())
@pytest.mark.parametrize("cp_size", (1, 2, 4))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
def test_token_and_grid_agree_bitwise_and_match_reference(lengths, cp_size, dtype, monkeypatch):
    dev = torch.device("cuda")
    H, D = 3, 64
    gen = torch.Generator(device=dev)
    gen.seed()
    glob = [n * cp_size for n in lengths]  # global lengths: divisible by 2 * cp_size
    cu = torch.tensor([0] + glob, device=dev).cumsum(0).to(torch.int32)
    tokens = sum(lengths)
    freqs = torch.rand(max(glob) + 8, 1, 1, 48, generator=gen, device=dev) * 50
    offsets = torch.randint(0, 5, (len(lengths),), generator=gen, device=dev, dtype=torch.int32)
    ranks = range(cp_size) if len(lengths) < 100 else (cp_size - 1,)
    for rank in ranks:
        for interleaved in (False, True):
            for backward in (False, True):
                x = torch.randn(tokens, H, D, generator=gen, device=dev).to(dtype)
                kw = dict(freqs=freqs, layout="thd", cu_seqlens=cu, cp_size=cp_size, cp_rank=rank, offsets=offsets,
                          interleaved=interleaved, backward=backward, max_seqlen=max(glob))
                outs = _run_both(x, monkeypatch, **kw)
                what = f"cp {rank}/{cp_size} interleaved={interleaved} backward={backward}"
                assert torch.equal(outs["token"], outs["grid"]), f"token and grid differ: {what}"
                assert_matches_reference(outs["token"], cukiln.reference.rope(x, **kw), what)


def test_tokens_past_the_last_sequence_are_left_alone(monkeypatch):
    dev = torch.device("cuda")
    x = torch.randn(50, 2, 32, device=dev)
    cu = torch.tensor([0, 10, 30], device=dev, dtype=torch.int32)  # tokens 30..49 belong to no sequence
    for mode in ("token", "grid"):
        monkeypatch.setitem(overrides.CURRENT, "rope_thd_dispatch", mode)
        out = torch.full_like(x, float("nan"))
        cukiln.rope(x, base=10000.0, layout="thd", cu_seqlens=cu, out=out)
        assert torch.isnan(out[30:]).all(), f"{mode}: wrote rows outside every sequence"
        assert_matches_reference(out[:30], cukiln.reference.rope(x, base=10000.0, layout="thd", cu_seqlens=cu)[:30])


def test_malformed_device_cu_seqlens_give_nan_rows_and_no_wild_reads(monkeypatch):
    dev = torch.device("cuda")
    x = torch.randn(40, 2, 32, device=dev)
    cu = torch.tensor([0, 12, 18, 40], device=dev, dtype=torch.int32)  # lengths 12, 6, 22: 6 % 4 != 0, 22 % 4
    for mode in ("token", "grid"):
        monkeypatch.setitem(overrides.CURRENT, "rope_thd_dispatch", mode)
        out = torch.full_like(x, 7.0)
        cukiln.rope(x, base=10000.0, layout="thd", cu_seqlens=cu, cp_size=2, cp_rank=0, out=out)
        torch.cuda.synchronize()
        assert not torch.isnan(out[:6]).any()  # the first sequence (12 global tokens, 6 local) is valid
        assert torch.isnan(out[6:20]).all()  # the next two are not divisible by 2 * cp_size


def test_thd_with_explicit_positions_needs_no_cu_seqlens():
    dev = torch.device("cuda")
    x = torch.randn(77, 4, 64, device=dev, dtype=torch.bfloat16)
    positions = torch.randint(0, 500, (77,), device=dev)
    freqs = torch.rand(500, 64, device=dev) * 30
    out = cukiln.rope(x, freqs=freqs, layout="thd", positions=positions)
    assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs, layout="thd", positions=positions))


@pytest.mark.parametrize("layout", ("sbhd", "bshd"))
@pytest.mark.parametrize("cp_size", (2, 4))
def test_dense_context_parallel_matches_reference(layout, cp_size):
    dev = torch.device("cuda")
    S, B, H, D = 24, 3, 4, 64
    shape = (S, B, H, D) if layout == "sbhd" else (B, S, H, D)
    freqs = torch.rand(S * cp_size + 4, 1, 1, D, device=dev) * 40
    for rank in range(cp_size):
        x = torch.randn(shape, device=dev, dtype=torch.float16)
        kw = dict(freqs=freqs, layout=layout, cp_size=cp_size, cp_rank=rank, offsets=2)
        assert_matches_reference(cukiln.rope(x, **kw), cukiln.reference.rope(x, **kw), f"rank {rank}")


def test_cpu_cu_seqlens_are_checked_and_used():
    dev = torch.device("cuda")
    x = torch.randn(30, 2, 32, device=dev)
    cu = torch.tensor([0, 10, 30], dtype=torch.int32)
    out = cukiln.rope(x, base=500.0, layout="thd", cu_seqlens=cu)
    assert_matches_reference(out, cukiln.reference.rope(x, base=500.0, layout="thd", cu_seqlens=cu))
    with pytest.raises(ValueError, match="non-decreasing"):
        cukiln.rope(x, base=500.0, layout="thd", cu_seqlens=torch.tensor([0, 20, 10], dtype=torch.int32))
    with pytest.raises(ValueError, match="exceeds"):
        cukiln.rope(x, base=500.0, layout="thd", cu_seqlens=torch.tensor([0, 20, 40], dtype=torch.int32))
