"""The float64 reference's mathematical properties (CPU)."""

from __future__ import annotations

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
        kw = {"inv_freq": torch.rand(16, dtype=torch.float32), "scale": 0.5}
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


def test_positions_outside_a_table_give_nan():
    x = _x(3, 1, 1, 4)
    y = reference.rope(x, freqs=torch.rand(2, 4), offsets=0)
    assert torch.isnan(y[2]).all() and not torch.isnan(y[:2]).any()
