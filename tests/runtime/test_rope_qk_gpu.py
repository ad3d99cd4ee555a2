"""rope_qk, the packed cos|sin cache and the rotated span's offset on the GPU, against the float64 reference: q and
k as views of one fused qkv projection, in place (untouched features and heads keep their bits) and out of place,
int32 and int64 positions, every decode-size token count (the head split), the two-launch fallbacks, backward,
the torch ops (gradients, torch.compile, CUDA graphs). Outputs are NaN-poisoned before each launch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
import cukiln.torch as ct  # noqa: E402
from cukiln.rope_api import plan_call  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import assert_matches_reference  # noqa: E402

pytestmark = pytest.mark.gpu


def fused(t, hq=32, hk=8, d=128, dtype=torch.bfloat16, gen=None):
    """A [t, (hq + 2 hk) d] projection and its q, k views [t, h, d] (v stays untouched)."""
    qkv = torch.randn(t, (hq + 2 * hk) * d, generator=gen, device="cuda").to(dtype)
    return qkv, qkv[:, : hq * d].view(t, hq, d), qkv[:, hq * d:(hq + hk) * d].view(t, hk, d)


def cos_sin_cache(max_pos, rd, dtype, gen):
    inv = 1.0 / (10000.0 ** (torch.arange(0, rd, 2, device="cuda", dtype=torch.float64) / rd))
    angles = torch.arange(max_pos, device="cuda", dtype=torch.float64)[:, None] * inv
    return torch.cat([angles.cos(), angles.sin()], dim=1).to(dtype)


@pytest.mark.parametrize("t", [1, 3, 16, 64, 256, 1000])
@pytest.mark.parametrize("pos_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16])
def test_fused_qkv_in_place_rotates_q_and_k_and_leaves_v_bits(t, pos_dtype, cache_dtype):
    gen = new_generator()
    qkv, q, k = fused(t, gen=gen)
    before = qkv.clone()
    positions = torch.randint(0, 4096, (t,), generator=gen, device="cuda").to(pos_dtype)
    cache = cos_sin_cache(4096, 128, cache_dtype, gen)
    kw = dict(cos_sin_cache=cache, positions=positions, layout="thd")
    plan, _ = plan_call(q, k=k, inplace=True, **kw)
    assert plan.symbol.endswith("_qk") and plan.then is None, "one launch for q and k"
    ref_q, ref_k = cukiln.reference.rope_qk(before[:, :4096].view(t, 32, 128), before[:, 4096:5120].view(t, 8, 128),
                                            **kw)
    got = cukiln.rope_qk(q, k, inplace=True, **kw)
    assert got[0] is q and got[1] is k
    assert_matches_reference(q, ref_q, f"q, t={t}")
    assert_matches_reference(k, ref_k, f"k, t={t}")
    assert torch.equal(qkv[:, 5120:], before[:, 5120:]), "v is untouched"


@pytest.mark.parametrize("interleaved", [False, True])
def test_out_of_place_with_other_strides_and_an_offset_span(interleaved):
    gen = new_generator()
    _, q, k = fused(300, hq=8, hk=2, d=256, gen=gen)
    k = k.transpose(0, 1).contiguous().transpose(0, 1)  # k with other strides than q
    kw = dict(base=10000.0, rotary_dim=64, rotary_offset=192, positions=torch.arange(300, device="cuda"),
              layout="thd", interleaved=interleaved)
    outs = (torch.full_like(q, float("nan")), torch.full_like(k, float("nan")))
    q_out, k_out = cukiln.rope_qk(q, k, out=outs, **kw)
    for what, x, out in (("q", q, q_out), ("k", k, k_out)):
        assert_matches_reference(out, cukiln.reference.rope(x, **kw), what)
        assert torch.equal(out[..., :192], x[..., :192]), f"{what}: the features before the span are copied"


def test_in_place_offset_span_touches_only_its_features():
    gen = new_generator()
    x = torch.randn(4, 2, 16, 192, generator=gen, device="cuda").to(torch.float16)  # MLA: rotary part at the end
    before = x.clone()
    cukiln.rope(x, base=10000.0, rotary_dim=64, rotary_offset=128, inplace=True)
    assert torch.equal(x[..., :128], before[..., :128])
    assert_matches_reference(x, cukiln.reference.rope(before, base=10000.0, rotary_dim=64, rotary_offset=128), "mla")


def test_packed_sequences_and_strided_last_dims_take_a_second_launch_and_match():
    gen = new_generator()
    q = torch.randn(90, 4, 64, generator=gen, device="cuda").to(torch.bfloat16)
    k = torch.randn(90, 2, 128, generator=gen, device="cuda").to(torch.bfloat16)[..., ::2]  # strided last dim
    cu = torch.tensor([0, 30, 90], device="cuda", dtype=torch.int32)
    for kw in (dict(layout="thd", cu_seqlens=cu, base=500.0), dict(layout="thd", positions=torch.arange(90, device="cuda"),
                                                                base=500.0)):
        plan, _ = plan_call(q, k=k, **kw)
        assert plan.then is not None
        q_out, k_out = cukiln.rope_qk(q, k, **kw)
        assert_matches_reference(q_out, cukiln.reference.rope(q, **kw), "q")
        assert_matches_reference(k_out, cukiln.reference.rope(k, **kw), "k")


def test_backward_is_the_vjp_and_the_torch_op_differentiates_both():
    gen = new_generator()
    q = torch.randn(64, 2, 8, 64, generator=gen, device="cuda", requires_grad=True)
    k = torch.randn(64, 2, 2, 64, generator=gen, device="cuda", requires_grad=True)
    freqs = torch.rand(64, 64, generator=gen, device="cuda") * 20
    q_out, k_out = ct.rope_qk(q, k, freqs=freqs)
    gq, gk = torch.randn_like(q_out), torch.randn_like(k_out)
    dq, dk = torch.autograd.grad((q_out * gq).sum() + (k_out * gk).sum(), (q, k))
    assert_matches_reference(dq, cukiln.reference.rope(gq, freqs=freqs, backward=True), "dq")
    assert_matches_reference(dk, cukiln.reference.rope(gk, freqs=freqs, backward=True), "dk")
    b_q, b_k = cukiln.rope_qk(gq, gk, freqs=freqs, backward=True)
    assert torch.equal(b_q, dq) and torch.equal(b_k, dk)


def test_compiled_and_captured_rope_qk_match_eager():
    gen = new_generator()
    _, q, k = fused(64, gen=gen)
    cache = cos_sin_cache(512, 128, torch.float32, gen)
    positions = torch.randint(0, 512, (64,), generator=gen, device="cuda")

    def step(q, k):
        return ct.rope_qk(q, k, cos_sin_cache=cache, positions=positions, layout="thd")

    compiled = torch.compile(step, fullgraph=True)
    got, want = compiled(q, k), step(q, k)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    # eager and compiled run the same plans: the float64 reference is the independent check
    ref_q, ref_k = cukiln.reference.rope_qk(q, k, cos_sin_cache=cache, positions=positions, layout="thd")
    assert_matches_reference(got[0], ref_q, "compiled q")
    assert_matches_reference(got[1], ref_k, "compiled k")
    q2, k2 = q.clone(), k.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        cukiln.rope_qk(q2, k2, cos_sin_cache=cache, positions=positions, layout="thd", inplace=True)
    torch.cuda.current_stream().wait_stream(side)
    q2.copy_(q), k2.copy_(k)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cukiln.rope_qk(q2, k2, cos_sin_cache=cache, positions=positions, layout="thd", inplace=True)
    q2.copy_(q), k2.copy_(k)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(q2, want[0]) and torch.equal(k2, want[1])
