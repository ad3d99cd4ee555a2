"""Comparison with the float64 reference for the GPU tests: cukiln.tools.verify's, as an assertion."""

from __future__ import annotations

from cukiln.tools.verify import compare


def assert_matches_reference(out, ref, what: str = "", *, fp32_units: float = 4) -> None:
    """``fp32_units``: the fp32 arithmetic's allowance in units of 2**-22 x max|ref| (a kernel whose fp32
    intermediates are themselves amplified, like logits through exp, passes a larger one)."""
    problem = compare(out, ref, fp32_units=fp32_units)
    assert problem is None, f"{what}: {problem}"
