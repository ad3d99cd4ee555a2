"""Comparison with the float64 reference, shared by the GPU tests and `cukiln verify`-style checks."""

from __future__ import annotations

import torch

# Allowed error: fp32 outputs within 1e-5 of the reference relative to its largest magnitude;
# fp16/bf16 outputs within 2 ulp of the reference (rounded to the dtype) plus the fp32 arithmetic's
# own error, a few 2**-22 of the largest magnitude.
_MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7}


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype`` at each value's magnitude (float64)."""
    mag = values.abs().to(torch.float64)
    exponent = torch.floor(torch.log2(mag.clamp_min(torch.finfo(dtype).tiny)))
    return torch.pow(2.0, exponent - _MANTISSA_BITS[dtype])


def assert_matches_reference(out: torch.Tensor, ref: torch.Tensor, what: str = "", *, fp32_units: float = 4) -> None:
    """``fp32_units``: the fp32 arithmetic's allowance in units of 2**-22 x max|ref| (a kernel whose fp32
    intermediates are themselves amplified, like logits through exp, passes a larger one)."""
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    got = out.to(torch.float64)
    assert not torch.isnan(ref).any(), f"{what}: the reference itself has NaNs"
    nan = torch.isnan(got)
    assert not nan.any(), f"{what}: {int(nan.sum())} output elements unwritten or NaN"
    scale = ref.abs().max().item() or 1.0
    err = (got - ref).abs()
    if out.dtype == torch.float32:
        worst = err.max().item() / scale
        assert worst <= 1e-5, f"{what}: max error {worst:.3g} x max|ref| > 1e-5"
        return
    ref_rounded = ref.to(out.dtype).to(torch.float64)
    tol = 2 * ulp(ref_rounded, out.dtype) + fp32_units * 2.0**-22 * scale
    bad = err > tol
    worst = (err / tol).flatten().argmax()
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} elements beyond 2 ulp; worst |err| {err.flatten()[worst].item():.3g} "
        f"at ref {ref.flatten()[worst].item():.4g}, {err.flatten()[worst].item() / tol.flatten()[worst].item():.2f}x "
        "the tolerance"
    )
