"""Attention sinks (gpt-oss) on the CPU: the float64 references fold each head's sink logit into the softmax's
denominator with no value (decode_attention, decode_step, merge_attention), a row without keys gives zeros and the sink
as its lse, and a bad sinks tensor is refused naming it."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402

B, H_KV, GROUP, T, D = 3, 2, 4, 30, 64


def _inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H_KV * GROUP, D, generator=gen).to(torch.bfloat16)
    k, v = (torch.randn(B, H_KV, T, D, generator=gen).to(torch.bfloat16) for _ in range(2))
    sinks = torch.linspace(-20.0, 20.0, H_KV * GROUP)  # large negative (no effect) to large positive (dominant)
    return q, k, v, sinks


def test_decode_with_sinks_is_the_softmax_with_one_more_logit_of_value_zero():
    q, k, v, sinks = _inputs()
    lens = torch.tensor([T, 0, 7], dtype=torch.int32)
    got, lse = cukiln.reference.decode_attention(q, k, v, lens, sinks=sinks, return_lse=True)
    scale = 1 / math.sqrt(D)
    for i in range(B):
        n = int(lens[i])
        for h in range(H_KV * GROUP):
            logits = (k[i, h // GROUP, :n].double() @ q[i, h].double()) * scale
            every = torch.cat((logits, sinks[h:h + 1].double()))
            weights = torch.softmax(every, 0)[:n]
            want = weights @ v[i, h // GROUP, :n].double()
            assert torch.allclose(got[i, h], want, rtol=1e-12, atol=1e-12)
            assert math.isclose(lse[i, h].item(), torch.logsumexp(every, 0).item(), rel_tol=1e-12, abs_tol=1e-12)
    assert torch.equal(got[1], torch.zeros_like(got[1])) and torch.equal(lse[1], sinks.double())


def test_the_step_and_the_merge_take_sinks_alike():
    q, k, v, sinks = _inputs(1)
    lens = torch.tensor([5, 12, 0], dtype=torch.int32)
    gen = torch.Generator().manual_seed(2)
    k_new, v_new = (torch.randn(B, H_KV, D, generator=gen).to(torch.bfloat16) for _ in range(2))
    k_step, v_step = k.clone(), v.clone()
    got = cukiln.reference.decode_step(q, k_new, v_new, k_step, v_step, lens.clone(), base=1e4, sinks=sinks)
    q_rot = cukiln.reference.kv_append(q, k_new, v_new, k.clone(), v.clone(), lens, base=1e4).to(q.dtype)
    want = cukiln.reference.decode_attention(q_rot, k_step, v_step, lens + 1, sinks=sinks)
    assert torch.equal(got, want)
    # a merge of the parts of a split cache with the sinks: the attention with the sinks over the whole cache
    whole, whole_lse = cukiln.reference.decode_attention(q, k, v, T, sinks=sinks, return_lse=True)
    parts = [cukiln.reference.decode_attention(q, k[:, :, a:b], v[:, :, a:b], b - a, return_lse=True)
             for a, b in ((0, 11), (11, T))]
    merged, merged_lse = cukiln.reference.merge_attention(torch.stack([o for o, _ in parts]),
                                                          torch.stack([s for _, s in parts]), sinks=sinks,
                                                          return_lse=True)
    assert torch.allclose(merged, whole, rtol=1e-10, atol=1e-12)
    assert torch.allclose(merged_lse, whole_lse, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sinks, error, words", [
    (torch.zeros(H_KV * GROUP + 1), ValueError, r"sinks: expected shape \[8\]"),
    (torch.zeros(H_KV * GROUP, dtype=torch.int32), TypeError, "sinks: expected"),
    (torch.zeros(2, 4), ValueError, r"sinks: expected shape \[8\]"),
])
def test_bad_sinks_are_refused_naming_them(sinks, error, words):
    q, k, v, _ = _inputs()
    with pytest.raises(error, match=words):
        cukiln.reference.decode_attention(q, k, v, T, sinks=sinks)


def test_a_sink_of_minus_infinity_on_a_row_without_keys_gives_zeros():
    q, k, v, _ = _inputs()
    sinks = torch.full((H_KV * GROUP,), float("-inf"))
    out, lse = cukiln.reference.decode_attention(q, k, v, torch.tensor([0, 3, 0], dtype=torch.int32), sinks=sinks,
                                                 return_lse=True)
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.isneginf(lse[0]).all()
    assert torch.equal(out[1], cukiln.reference.decode_attention(q, k, v, torch.tensor([0, 3, 0], dtype=torch.int32))[1])
