"""The float64 reference's mathematical properties (CPU)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from cukiln import reference  # noqa: E402


def _x(*shape):
    return torch.randn(*shape, dtype=torch.float64)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("source", ["base", "inv_freq", "cos_sin_half"])
def test_norm_preserved_and_backward_inverts_forward_when_pairs_share_angles(interleaved, source):
    x = _x(7, 3, 4, 32)
    if source == "base":
        kw = {"base": 10000.0}
    elif source == "inv_freq":
        kw = {"inv_freq": torch.rand(16, dtype=torch.float32), "rope_scale": 0.5}
    else:
        theta = torch.rand(10, 16, dtype=torch.float64) * 10
        kw = {"cos": theta.cos(), "sin": theta.sin(), "rotary_dim": 32}
    y = reference.rope(x, interleaved=interleaved, **kw)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1))
    back = reference.rope(y, interleaved=interleaved, backward=True, **kw)
    assert torch.allclose(back, x, atol=1e-12)


def test_tail_untouched_and_layouts_agree():
    x = _x(5, 2, 3, 16)
    y = reference.rope(x, base=100.0, rotary_dim=8)
    assert torch.equal(y[..., 8:], x[..., 8:])
    yb = reference.rope(x.transpose(0, 1), base=100.0, rotary_dim=8, layout="bshd")
    assert torch.equal(yb.transpose(0, 1), y)


def test_backward_is_the_vector_jacobian_product_with_per_feature_angles():
    x = _x(4, 2, 3, 8).requires_grad_(False)
    freqs = torch.rand(6, 8, dtype=torch.float32) * 5  # partners' angles differ
    g = _x(4, 2, 3, 8)
    # The VJP by autograd through an explicit float64 forward.
    xs = x.clone().requires_grad_(True)
    f = freqs.to(torch.float64)[:4, None, None, :]
    rot = torch.cat((-xs[..., 4:], xs[..., :4]), -1)
    (xs * f.cos() + rot * f.sin()).backward(g)
    assert torch.allclose(reference.rope(g, freqs=freqs, backward=True), xs.grad, atol=1e-12)


def test_positions_and_offsets_agree():
    x = _x(6, 2, 2, 8)
    by_offsets = reference.rope(x, base=10.0, offsets=torch.tensor([3, 5]))
    positions = torch.stack([torch.arange(6) + 3, torch.arange(6) + 5])
    assert torch.equal(by_offsets, reference.rope(x, base=10.0, positions=positions))


def test_positions_outside_a_table_give_nan_where_only_the_device_knows_them():
    x = _x(3, 1, 1, 4)
    y = reference.rope(x, freqs=torch.rand(2, 4), positions=torch.arange(3))
    assert torch.isnan(y[2]).all() and not torch.isnan(y[:2]).any()
    with pytest.raises(ValueError, match="fall outside the angle table"):  # known on the host: refused, as cukiln.rope
        reference.rope(x, freqs=torch.rand(2, 4), offsets=0)


# --- decode attention ---------------------------------------------------------------------------


def _decode_case(b=3, h_q=8, h_kv=2, T=40, d=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h_q, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, h_kv, T, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, h_kv, T, d, generator=gen, dtype=torch.float64)
    return q, k, v


def test_decode_reference_is_softmax_attention_with_gqa_and_per_row_ranges():
    q, k, v = _decode_case()
    lens, start = torch.tensor([40, 7, 25]), torch.tensor([0, 2, 20])
    out, lse = reference.decode_attention(q, k, v, lens, kv_start=start, scale=0.3, return_lse=True)
    for i in range(3):
        for h in range(8):
            keys = k[i, h // 4, start[i]:lens[i]]
            logits = 0.3 * keys @ q[i, h]
            w = torch.softmax(logits, 0)
            assert torch.allclose(out[i, h], w @ v[i, h // 4, start[i]:lens[i]], atol=1e-12)
            assert torch.allclose(lse[i, h], torch.logsumexp(logits, 0), atol=1e-12)


def test_decode_reference_layouts_and_query_forms_agree():
    q, k, v = _decode_case()
    base = reference.decode_attention(q, k, v, 30)
    assert torch.allclose(reference.decode_attention(q, k.transpose(1, 2), v.transpose(1, 2), 30, kv_layout="bshd"),
                          base)
    for form in (q.unsqueeze(1), q.unsqueeze(2)):  # [b, 1, h, d], [b, h, 1, d]: the output is shaped like q
        got = reference.decode_attention(form, k, v, 30)
        assert got.shape == form.shape and torch.equal(got.reshape(base.shape), base)
    empty = reference.decode_attention(q[:0].unsqueeze(1), k[:0], v[:0], 0)  # an empty batch keeps q's shape
    assert empty.shape == (0, 1) + q.shape[1:]


def test_decode_reference_output_is_a_convex_combination_and_softcap_bounds_logits():
    q, k, v = _decode_case(T=64)
    q = q * 50  # large logits
    out, lse = reference.decode_attention(q, k, v, 64, softcap=5.0, return_lse=True)
    v_rep = v.repeat_interleave(4, dim=1)
    assert (out <= v_rep.amax(2) + 1e-12).all() and (out >= v_rep.amin(2) - 1e-12).all()
    # capped logits lie in (-5, 5), so the log-sum-exp of 64 of them lies in (log 64 - 5, log 64 + 5)
    assert (lse >= -5.0 + math.log(64) - 1e-9).all() and (lse <= 5.0 + math.log(64) + 1e-9).all()


def test_decode_reference_empty_rows_are_zero_with_minus_inf_lse():
    q, k, v = _decode_case()
    out, lse = reference.decode_attention(q, k, v, torch.tensor([0, 5, 9]), kv_start=torch.tensor([0, 5, 0]),
                                          return_lse=True)
    assert torch.equal(out[:2], torch.zeros_like(out[:2])) and torch.isneginf(lse[:2]).all()
    assert torch.isfinite(lse[2]).all()


def test_decode_reference_ignores_whatever_the_unattended_slots_hold():
    q, k, v = _decode_case()
    lens, start = torch.tensor([40, 7, 25]), torch.tensor([0, 2, 20])
    clean = reference.decode_attention(q, k, v, lens, kv_start=start)
    t = torch.arange(40)
    outside = ((t < start[:, None]) | (t >= lens[:, None]))[:, None, :, None]  # [b, 1, T, 1]
    poisoned = [torch.where(outside, torch.full_like(c, float("nan")), c) for c in (k, v)]
    assert torch.equal(reference.decode_attention(q, *poisoned, lens, kv_start=start), clean)


def test_the_reference_refuses_what_the_kernels_refuse():
    x = _x(5, 2, 3, 64)
    with pytest.raises(ValueError, match="rotary_dim: expected an even number"):
        reference.rope(x, base=10000.0, rotary_dim=33)
    with pytest.raises(ValueError, match="angles: expected exactly one of"):
        reference.rope(x)
    q, k, v = _decode_case()[:3]
    with pytest.raises(ValueError, match="kv_lens: expected 0 <= kv_lens <= T = 40"):
        reference.decode_attention(q, k, v, 41)
    with pytest.raises(ValueError, match="kv_lens: expected values in"):
        reference.decode_attention(q, k, v, torch.tensor([40, 41, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match="multiple of k_cache's 3"):
        reference.decode_attention(q, torch.cat([k, k[:, :1]], 1), torch.cat([v, v[:, :1]], 1), 40)


def test_the_reference_writes_x_in_place_and_out_as_asked():
    x = _x(5, 2, 3, 64).to(torch.float32)
    expected = reference.rope(x, base=10000.0)
    out = torch.full_like(x, float("nan"))
    assert reference.rope(x, base=10000.0, out=out) is out
    torch.testing.assert_close(out, expected.to(torch.float32))
    y = x.clone()
    assert reference.rope(y, base=10000.0, inplace=True) is y
    torch.testing.assert_close(y, expected.to(torch.float32))
    q, k, v = (t.to(torch.bfloat16) for t in _decode_case()[:3])
    out = torch.full_like(q, float("nan"))
    assert reference.decode_attention(q, k, v, 40, out=out) is out
    torch.testing.assert_close(out, reference.decode_attention(q, k, v, 40).to(torch.bfloat16))


def test_the_decode_steps_reference_takes_float64_tensors_as_the_kernels_types():
    # its planning's stand-ins for the rotated query and the new lengths stand for q's and kv_lens' kernel dtypes
    import cukiln

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, h, 64, generator=gen, dtype=torch.float64) for h in (8, 2, 2))
    caches = [torch.randn(2, 2, 16, 64, generator=gen, dtype=torch.float64) for _ in range(2)]
    narrow = [c.clone().to(torch.bfloat16) for c in caches]
    lens = torch.tensor([3, 5], dtype=torch.int32)
    got = cukiln.reference.decode_step(q, k, v, *caches, lens, base=1e4)
    want = cukiln.reference.decode_step(q.bfloat16(), k.bfloat16(), v.bfloat16(), *narrow, lens, base=1e4)
    assert got.dtype == torch.float64 and got.shape == want.shape
    assert torch.allclose(got, want.double(), atol=5e-2)  # the same step; bf16 inputs rounded
