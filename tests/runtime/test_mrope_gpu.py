"""M-RoPE on the GPU, as its users call it: Qwen2-VL's chunked and Qwen3-VL's interleaved sections on the models'
head counts, q and k read in place from a fused qkv projection (bshd, strided, no copies) or as vLLM's [t, h, d]
slices with [3, t] positions and a packed cos|sin cache; bf16 and fp32, forward and backward, in place and out of
place, the torch ops eager and compiled. Each result is compared with the float64 reference (the kernels'
precision) and with transformers' own rotary modules (the meaning). Outputs are NaN-poisoned before each launch.
Every sectioned variant the build emits is also run by test_rope_gpu.py (cukiln verify's check)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", minversion="5")

import cukiln  # noqa: E402
import cukiln.torch as ct  # noqa: E402
from cukiln.rope_api import plan_call  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import assert_matches_reference  # noqa: E402

from .test_mrope import QWEN2_VL, QWEN3_VL, transformers_mrope  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("quiet_transformers")]

# name: (rope parameters, q heads, kv heads, head dim)
MODELS = {"qwen2-vl-7b": (QWEN2_VL, 28, 4, 128), "qwen3-vl-8b": (QWEN3_VL, 32, 8, 128)}


def _positions(b: int, s: int, gen) -> torch.Tensor:
    """[3, b, s]: a run of text (three equal rows) and an image's grid (time fixed, height and width apart), as
    Qwen2-VL's get_rope_index lays them out."""
    pos = torch.empty(3, b, s, dtype=torch.int64, device="cuda")
    text = s // 3
    pos[:, :, :text] = torch.arange(text, device="cuda")
    grid = s - text
    w = 8
    i = torch.arange(grid, device="cuda")
    pos[0, :, text:] = text
    pos[1, :, text:] = text + i // w
    pos[2, :, text:] = text + i % w
    return pos + torch.randint(0, 3000, (1, b, 1), generator=gen, device="cuda")  # a later turn


def _fused(b, s, hq, hk, d, dtype, gen):
    """q [b, s, hq, d] and k [b, s, hk, d]: views into one qkv projection [b, s, (hq + 2 hk) d]."""
    qkv = torch.randn(b, s, (hq + 2 * hk) * d, generator=gen, device="cuda").to(dtype)
    return qkv, qkv[..., : hq * d].unflatten(-1, (hq, d)), qkv[..., hq * d:(hq + hk) * d].unflatten(-1, (hk, d))


def _model_case(model: str, b: int, s: int, dtype):
    """(qkv, q, k, positions, rope's arguments) for one model: a fused projection, [3, b, s] positions, the recipe
    from the model's rope parameters, bshd."""
    params, hq, hk, d = MODELS[model]
    gen = new_generator()
    qkv, q, k = _fused(b, s, hq, hk, d, dtype, gen)
    positions = _positions(b, s, gen)
    recipe = cukiln.rope_recipe(params, head_dim=d, max_position_embeddings=32768, device="cuda")
    return qkv, q, k, positions, dict(positions=positions, layout="bshd", **recipe)


def _near_transformers(what, got, want, positions):
    # transformers forms angles in fp32 (position * inv_freq rounds to 2**-24 of the angle) and, for bf16, rounds
    # cos and sin and every product to bf16; the kernels form them in fp64 and round once
    angle_error = 4 * positions.max().item() * 2.0**-24
    tolerance = (angle_error + (2.0**-6 if got.dtype == torch.bfloat16 else 2.0**-20)) * want.abs().max().item()
    err = (got.float() - want.float()).abs().max().item()
    assert err <= tolerance, f"{what}: {err:.3g} from transformers' result (tolerance {tolerance:.3g})"


@pytest.mark.parametrize("inplace", [False, True], ids=["out", "inplace"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_fused_projection_matches_the_reference_and_transformers(model, dtype, inplace):
    params, hq, hk, d = MODELS[model]
    qkv, q, k, positions, kw = _model_case(model, 2, 300, dtype)
    q0, k0 = q.clone(), k.clone()
    ref_q, ref_k = cukiln.reference.rope_qk(q0, k0, **kw)
    want_q, want_k = transformers_mrope(model.split("-")[0] + "-vl", q0.float(), k0.float(), positions, params, hq)
    v = qkv[..., (hq + hk) * d:].clone()
    if inplace:
        got_q, got_k = cukiln.rope_qk(q, k, inplace=True, **kw)
        assert got_q is q and got_k is k
        assert torch.equal(qkv[..., (hq + hk) * d:], v), "v, beside q and k in the projection, was written"
    else:
        outs = (torch.full_like(q0, float("nan")), torch.full_like(k0, float("nan")))
        got_q, got_k = cukiln.rope_qk(q, k, out=outs, **kw)
        assert torch.equal(q, q0) and torch.equal(k, k0), "an out-of-place call wrote its inputs"
    assert_matches_reference(got_q, ref_q, f"{model} q")
    assert_matches_reference(got_k, ref_k, f"{model} k")
    _near_transformers(f"{model} q", got_q, want_q, positions)
    _near_transformers(f"{model} k", got_k, want_k, positions)


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16], ids=["fp32-cache", "bf16-cache"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_serving_slices_with_a_packed_cache_and_three_rows_of_positions(model, cache_dtype):
    """vLLM's call: q and k [t, h, d] slices of the projection, positions [3, t], the cos|sin cache."""
    params, hq, hk, d = MODELS[model]
    gen = new_generator()
    t = 257
    qkv, q, k = _fused(1, t, hq, hk, d, torch.bfloat16, gen)
    q, k = q[0], k[0]
    positions = _positions(1, t, gen)[:, 0]  # [3, t]
    recipe = cukiln.rope_recipe(params, head_dim=d, max_position_embeddings=32768, device="cuda")
    angles = torch.arange(8192, dtype=torch.float64, device="cuda")[:, None] * recipe["inv_freq"].double()
    cache = torch.cat((angles.cos(), angles.sin()), dim=1).to(cache_dtype)
    kw = dict(positions=positions, layout="thd", cos_sin_cache=cache, mrope_section=recipe["mrope_section"],
              mrope_interleaved=recipe["mrope_interleaved"])
    ref_q, ref_k = cukiln.reference.rope_qk(q.clone(), k.clone(), **kw)
    with_inv_freq = cukiln.reference.rope_qk(q.clone(), k.clone(), positions=positions, layout="thd", **recipe)
    plan, _ = plan_call(q, k=k, inplace=True, **kw)
    assert plan.then is None and plan.symbol.endswith("_qk_mrope"), plan.symbol
    cukiln.rope_qk(q, k, inplace=True, **kw)
    assert_matches_reference(q, ref_q, f"{model} q")
    assert_matches_reference(k, ref_k, f"{model} k")
    if cache_dtype == torch.float32:  # the same rotation as from the frequencies, to the cache's rounding
        torch.testing.assert_close(ref_q, with_inv_freq[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_backward_through_the_torch_op_is_the_reference_vjp(model, dtype):
    params, hq, *_ = MODELS[model]
    _, q, k, positions, kw = _model_case(model, 2, 64, dtype)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    out_q, out_k = ct.rope_qk(qg, kg, **kw)
    assert_matches_reference(out_q, cukiln.reference.rope(q, **kw), f"{model} q")
    gq, gk = torch.randn_like(out_q), torch.randn_like(out_k)
    torch.autograd.backward((out_q, out_k), (gq, gk))
    assert_matches_reference(qg.grad, cukiln.reference.rope(gq, backward=True, **kw), f"{model} dq")
    assert_matches_reference(kg.grad, cukiln.reference.rope(gk, backward=True, **kw), f"{model} dk")
    # and the gradient of transformers' formula (autograd through it, fp32) agrees
    qf, kf = q.float().requires_grad_(), k.float().requires_grad_()
    want_q, want_k = transformers_mrope(model.split("-")[0] + "-vl", qf, kf, positions, params, hq)
    torch.autograd.backward((want_q, want_k), (gq.float(), gk.float()))
    _near_transformers(f"{model} dq", qg.grad, qf.grad, positions)
    _near_transformers(f"{model} dk", kg.grad, kf.grad, positions)


def test_the_compiled_op_takes_the_sections():
    _, q, k, _, kw = _model_case("qwen2-vl-7b", 1, 96, torch.bfloat16)

    def layer(q, k):
        return ct.rope_qk(q, k, **kw)

    compiled = torch.compile(layer, fullgraph=True)
    got_q, got_k = compiled(q, k)
    ref_q, ref_k = cukiln.reference.rope_qk(q, k, **kw)
    assert_matches_reference(got_q, ref_q, "compiled q")
    assert_matches_reference(got_k, ref_k, "compiled k")


@pytest.mark.parametrize("layout", ["sbhd", "bshd"])
@pytest.mark.parametrize("pairing", [False, True], ids=["half", "interleaved"])
def test_a_single_tensor_of_any_strides_in_place(layout, pairing):
    """cukiln.rope on one tensor: a transposed (b, h, s, d) view read as bshd/sbhd, partial rotary inside the head,
    int32 positions of a strided [3, b, s] view."""
    gen = new_generator()
    b, s, h, d, rd = 3, 50, 6, 96, 64
    store = torch.randn(b, h, s, d, generator=gen, device="cuda").to(torch.bfloat16)
    x = store.transpose(1, 2) if layout == "bshd" else store.permute(2, 0, 1, 3)
    big = torch.randint(0, 4000, (3, b, 2 * s), generator=gen, dtype=torch.int32, device="cuda")
    kw = dict(positions=big[:, :, ::2], layout=layout, base=10000.0, rotary_dim=rd,
              rotary_offset=16, interleaved=pairing, mrope_section=(8, 12, 12), mrope_interleaved=not pairing)
    ref = cukiln.reference.rope(x.clone(), **kw)
    cukiln.rope(x, inplace=True, **kw)
    assert_matches_reference(x, ref, f"{layout} in place")
