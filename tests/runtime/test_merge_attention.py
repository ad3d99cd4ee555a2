"""merge_attention on the CPU: its float64 reference against the attention over the union of the parts' keys, and
every bad input refused naming the argument (the planner's checks, which the kernel runs too)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402


def _parts(gen, cuts=(0, 30, 30, 101)):
    q = torch.randn(2, 4, 64, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 2, cuts[-1], 64, generator=gen, dtype=torch.float64) for _ in range(2))
    parts = [cukiln.reference.decode_attention(q, k[:, :, a:b], v[:, :, a:b], b - a, return_lse=True)
             for a, b in zip(cuts, cuts[1:])]
    whole = cukiln.reference.decode_attention(q, k, v, cuts[-1], return_lse=True)
    return torch.stack([o for o, _ in parts]), torch.stack([s for _, s in parts]), whole


def test_the_merge_of_the_parts_is_the_attention_over_all_their_keys():
    outs, lses, (want, want_lse) = _parts(torch.Generator().manual_seed(0))
    got, lse = cukiln.reference.merge_attention(outs, lses, return_lse=True)
    assert torch.allclose(got, want, rtol=0, atol=1e-12) and torch.allclose(lse, want_lse, rtol=0, atol=1e-12)
    out = torch.empty(2, 4, 64, dtype=torch.bfloat16)
    assert cukiln.reference.merge_attention(outs.bfloat16(), lses.float(), out=out) is out


@pytest.mark.parametrize("change, error, words", [
    (lambda o, s: (o.float(), s), TypeError, "outs: expected float16 or bfloat16"),
    (lambda o, s: (o[0], s), ValueError, r"outs: expected \[k, b, h, d\]"),
    (lambda o, s: (o, s.bfloat16()), TypeError, "lses: expected float32"),
    (lambda o, s: (o, s[:, :, :3]), ValueError, r"lses: expected shape \[3, 2, 4\]"),
    (lambda o, s: (o[:0], s[:0]), ValueError, "outs: expected at least one partial result"),
])
def test_bad_inputs_are_refused_naming_the_argument(change, error, words):
    outs, lses, _ = _parts(torch.Generator().manual_seed(1))
    outs, lses = change(outs.bfloat16(), lses.float())
    with pytest.raises(error, match=words):
        cukiln.reference.merge_attention(outs, lses)


def test_an_out_of_another_shape_or_overlapping_the_parts_is_refused():
    outs, lses, _ = _parts(torch.Generator().manual_seed(2))
    outs = outs.bfloat16()
    with pytest.raises(ValueError, match="out: expected"):
        cukiln.reference.merge_attention(outs, lses.float(), out=torch.empty(2, 4, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="out: overlaps outs"):
        cukiln.reference.merge_attention(outs, lses.float(), out=outs[0])
