"""The fused decode step on the GPU: every manifest variant (cukiln verify's check: the same bits as the step launched
as an append and an attention, and the float64 references), and the fused launch with its splits merged in a cluster
or by the combine kernel, against the two-launch step."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import decode_step_api  # noqa: E402
from cukiln.overrides import forced  # noqa: E402
from cukiln.tools.decode_step.checks import check_variant  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import manifest_entries  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9,
                                 reason="the fused step is the ws pipeline's kernel: sm_90 or newer")]


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


def _two_ways(args, kw):
    """The step run fused and as two launches on copies of the caches: (output, caches) of each."""
    q, k, v, k_cache, v_cache, lens = args
    runs = []
    for launch in ("fused", "separate"):
        caches = k_cache.clone(), v_cache.clone()
        with forced("decode_step_launch", launch):
            assert (decode_step_api.plan_call(q, k, v, *caches, lens, **kw).fused is not None) == (launch == "fused")
            runs.append((cukiln.decode_step(q, k, v, *caches, lens, **kw), *caches))
    return runs


@pytest.mark.parametrize("case", ["mqa_two_head_groups", "bshd_int64_positions", "fp16_d64_interleaved_freqs",
                                  "int_start_cos_sin_cache_qk_norm", "base_far_int64_positions"])
def test_the_fused_step_matches_the_two_launches_across_layouts_and_sources(case):
    gen = new_generator()
    dtype = torch.float16 if "fp16" in case else torch.bfloat16
    b, d, T = 3, 64 if "d64" in case else 128, 300
    hq, hkv = (64, 2) if case.startswith("mqa") else (16, 4)  # a group of 32 heads: two blocks per KV head
    q = torch.randn(b, hq, d, generator=gen, device="cuda").to(dtype)
    k, v = (torch.randn(b, hkv, d, generator=gen, device="cuda").to(dtype) for _ in range(2))
    shape = (b, T, hkv, d) if "bshd" in case else (b, hkv, T, d)
    caches = [torch.randn(*shape, generator=gen, device="cuda").to(dtype) for _ in range(2)]
    lens = torch.tensor([4, 150, T - 1], dtype=torch.int32, device="cuda")
    kw = {"kv_layout": "bshd" if "bshd" in case else "bhsd"}
    if "far" in case:  # base angles' inverse frequencies follow the rotation's width; far positions show it
        kw["positions"] = torch.tensor([2 ** 20 - 3, 700_001, 123_457], dtype=torch.int64, device="cuda")
        kw["base"] = 1e6
    elif "positions" in case:
        kw["positions"] = torch.tensor([7, 1000, 3], dtype=torch.int64, device="cuda")
        kw["base"] = 1e4
    elif "freqs" in case:
        kw.update(freqs=torch.rand(T + 8, d // 2, generator=gen, device="cuda") * 50, interleaved=True, rotary_dim=32)
    elif "cos_sin" in case:
        theta = torch.rand(T + 8, d // 2, generator=gen, device="cuda", dtype=torch.float64) * 100
        kw.update(cos_sin_cache=torch.cat((theta.cos(), theta.sin()), 1).float(), kv_start=2,
                  q_norm_weight=torch.rand(d, generator=gen, device="cuda").to(dtype) + 0.5,
                  k_norm_weight=torch.rand(d, generator=gen, device="cuda").to(dtype) + 0.5)
    else:
        kw["base"] = 5e5
    (fused, *fused_caches), (apart, *apart_caches) = _two_ways((q, k, v, *caches, lens), kw)
    assert torch.equal(fused, apart) and torch.isfinite(fused).all()
    assert all(torch.equal(a, b_) for a, b_ in zip(fused_caches, apart_caches))


@pytest.mark.parametrize("launch", ["fused", "separate"])
def test_an_out_over_q_is_refused_whichever_launches_serve_the_step(launch):
    gen = new_generator()
    qkv = torch.randn(2, (32 + 16) * 128, generator=gen, device="cuda").to(torch.bfloat16)
    q, k, v = qkv[:, :4096].view(2, 32, 128), qkv[:, 4096:5120].view(2, 8, 128), qkv[:, 5120:].view(2, 8, 128)
    caches = [torch.randn(2, 8, 64, 128, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2)]
    before = [c.clone() for c in caches]
    lens = torch.tensor([3, 40], dtype=torch.int32, device="cuda")
    with forced("decode_step_launch", launch):
        with pytest.raises(ValueError, match="out: overlaps q"):
            cukiln.decode_step(q, k, v, *caches, lens, base=1e4, out=q)
    torch.cuda.synchronize()
    assert all(torch.equal(c, b_) for c, b_ in zip(caches, before)), "a refused step wrote"


def test_a_step_takes_ws_where_the_table_picks_ws_deep(monkeypatch):
    """The fused kernels take the ws ring: where the table picks ws_deep (the same tiles, more stages), decode_attention
    runs ws_deep and the step ws, fused, at the table's ws split count; its two launches too, with the lengths on the
    device or on the host, so that every form gives the same bits."""
    from cukiln.decode_api import plan_call as plan_attention
    from cukiln.decode_plan import PIPELINES
    from cukiln.generated import dispatch

    gen = new_generator()
    b, hq, hkv, d, T = 2, 16, 4, 128, 1111  # a shape of its own: no plan cached by the tests before
    point = (b * hkv, 1024) + (PIPELINES.index("ws_deep"),) + tuple(
        {"ws": 3, "ws_deep": 2}.get(p, 1) for p in PIPELINES)
    from cukiln.loader import KERNELS

    target = KERNELS.tuning_target(torch.cuda.current_device())  # this GPU's own table where it has one
    monkeypatch.setitem(dispatch.DECODE_SPLIT, target, {"table": (point,)})
    q = torch.randn(b, hq, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(b, hkv, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    caches = [torch.randn(b, hkv, T, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2)]
    lens = torch.tensor([1000, 777], dtype=torch.int32, device="cuda")
    attention = plan_attention(q, *caches, lens)
    assert (attention.pipeline, attention.num_splits) == ("ws_deep", 2)
    step = decode_step_api.plan_call(q, k, v, *caches, lens, base=1e4)
    assert step.fused is not None and step.attention.pipeline == "ws" and step.attention.num_splits == 3
    (fused, *fused_caches), (separate, *separate_caches) = _two_ways((q, k, v, *caches, lens), {"base": 1e4})
    assert torch.equal(fused, separate) and all(map(torch.equal, fused_caches, separate_caches))
    host_caches = [c.clone() for c in caches]
    host = cukiln.decode_step(q, k, v, *host_caches, lens.cpu(), base=1e4)
    assert torch.equal(fused, host) and all(map(torch.equal, fused_caches, host_caches))
