"""The fused decode step on the GPU: every manifest variant (cukiln verify's check: the same bits as the step launched
as an append and an attention, and the float64 references), and the fused launch with its splits merged in a cluster
or by the combine kernel, against the two-launch step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import decode_step_api  # noqa: E402
from cukiln.overrides import forced  # noqa: E402
from cukiln.tools.decode_step import check_variant  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import manifest_entries  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("entry", manifest_entries("decode_step"), ids=lambda e: e["name"])
def test_every_manifest_variant(entry):
    problem = check_variant(entry)
    assert problem is None, f"{entry['name']}: {problem}"


@pytest.mark.parametrize("num_splits", [1, 4, 16])
@pytest.mark.parametrize("given_out", [False, True])
def test_the_fused_step_is_the_two_launch_step_to_the_bit(num_splits, given_out):
    gen = new_generator()
    b, hq, hkv, d, T = 2, 32, 8, 128, 4096
    q = torch.randn(b, hq, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(b, hkv, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    caches = [torch.randn(b, hkv, T, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2)]
    lens = torch.tensor([4000, 1234], dtype=torch.int32, device="cuda")
    kw = dict(base=1e6, num_splits=num_splits, return_lse=True)
    results = []
    for launch in ("fused", "separate"):
        k_cache, v_cache = (c.clone() for c in caches)
        out = torch.full_like(q, float("nan")) if given_out else None
        # a split count given takes the narrow pipeline unless one is forced; the fused kernel is the ws one's
        with forced("decode_pipeline", "ws"), forced("decode_step_launch", launch):
            step = decode_step_api.plan_call(q, k, v, k_cache, v_cache, lens, base=1e6, num_splits=num_splits)
            assert (step.fused is not None) == (launch == "fused")
            got, lse = cukiln.decode_step(q, k, v, k_cache, v_cache, lens, out=out, **kw)
        assert (got is out) == given_out
        results.append((got, lse, k_cache, v_cache))
    for a, b_ in zip(*results):
        assert torch.equal(a, b_)
    assert torch.isfinite(results[0][0]).all()
