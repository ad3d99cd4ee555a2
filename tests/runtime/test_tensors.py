"""Tensor metadata on the CPU: what from_torch refuses before any planning."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln.tensors import from_torch  # noqa: E402


def test_negated_views_are_refused_with_the_fix_named():
    negated = torch.randn(4, 1, 1, 8, dtype=torch.complex64).conj().imag  # memory holds the negatives
    assert negated.is_neg()
    with pytest.raises(ValueError, match=r"x: a negated view.*resolve_neg"):
        from_torch(negated, "x", cuda=False)
    assert from_torch(negated.resolve_neg(), "x", cuda=False).shape == (4, 1, 1, 8)
    with pytest.raises(ValueError, match="q: a negated view"):
        cukiln.decode_attention(negated, negated, negated, 1)
    with pytest.raises(ValueError, match="x: a negated view"):
        cukiln.rope(negated, base=10000.0)


def test_tensors_that_require_grad_are_refused_while_grad_mode_is_on():
    """Autograd would take the result as a constant: refused, before anything else is checked."""
    x = torch.randn(4, 1, 1, 8, requires_grad=True)  # on the CPU: past the check, the device check answers
    with pytest.raises(RuntimeError, match=r"x requires grad.*cukiln\.torch\.rope"):
        cukiln.rope(x, base=10000.0)
    with pytest.raises(RuntimeError, match="k_cache requires grad"):
        cukiln.decode_attention(x.detach(), x, x.detach(), 1)
    with pytest.raises(RuntimeError, match="out requires grad"):
        cukiln.rope(x.detach(), base=10000.0, out=torch.empty_like(x).requires_grad_(True))
    with pytest.raises(RuntimeError, match="out requires grad"):
        cukiln.decode_attention(x.detach(), x.detach(), x.detach(), 1, out=torch.empty_like(x).requires_grad_(True))
    with pytest.raises(RuntimeError, match="cos requires grad"):
        cukiln.rope(x.detach(), cos=x, sin=x.detach())
    with torch.no_grad():
        with pytest.raises(ValueError, match="CUDA tensor"):
            cukiln.rope(x, base=10000.0)
        with pytest.raises(ValueError, match="CUDA tensor"):
            half = x.to(torch.bfloat16)
            cukiln.decode_attention(half, half, half, 1)
    with pytest.raises(ValueError, match="CUDA tensor"):
        cukiln.rope(x.detach(), base=10000.0)


def test_a_dtype_error_lists_what_that_argument_accepts():
    x = torch.randn(4, 1, 1, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"^x: expected float32, float16 or bfloat16, got float64$"):
        cukiln.rope(x, base=10000.0)
    good = torch.randn(4, 1, 1, 8)
    with pytest.raises(TypeError, match=r"^positions: expected int32 or int64, got float32$"):
        from_torch(good, "positions", ("int32", "int64"), cuda=False)
    with pytest.raises(TypeError, match=r"^q: expected float16 or bfloat16, got float32$"):
        cukiln.decode_attention(good[:, 0], good, good, 1)
    with pytest.raises(TypeError, match=r"^kv_lens: expected an int32 tensor, got int64$"):
        half = good.to(torch.float16)
        cukiln.decode_attention(half[:, 0], half, half, torch.ones(4, dtype=torch.int64))
