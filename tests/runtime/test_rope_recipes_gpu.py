"""cukiln.rope_recipe's arguments run through the kernels on the GPU: each recipe on the rope parameters of a real
model config (written out here, nothing downloaded), q and k of the model's head counts, bf16 and fp32, forward and
backward, against the float64 reference (the kernels' precision) and against transformers' own rotary module and
formula (the recipe's meaning). Outputs are NaN-poisoned before each launch."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", minversion="5")

from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb  # noqa: E402
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding  # noqa: E402

import cukiln  # noqa: E402
import cukiln.torch as ct  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import assert_matches_reference  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("quiet_transformers")]


def _longrope_factors(n: int, top: float) -> list[float]:
    # Phi-3's lists rise from 1 toward a few tens over the pairs; a smooth rise of that shape
    return [round(1.0 + (top - 1.0) * (i / (n - 1)) ** 2, 4) for i in range(n)]


# name: (rope parameters, head_dim, max_position_embeddings, q heads, kv heads, partial_rotary_factor, rotary module)
MODELS = {
    "llama-3.1-8b": ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, 128, 131072, 32, 8, 1.0,
                     "llama"),
    "qwen2.5-7b-yarn": ({"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                         "original_max_position_embeddings": 32768}, 128, 131072, 28, 4, 1.0, "llama"),
    # DeepSeek-V2-Lite's rotary part: 64 dims, yarn with mscale = mscale_all_dim (the attention factor is then 1)
    # and V3's shape where they differ (an attention factor other than 1)
    "deepseek-v2-lite": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "beta_fast": 32, "beta_slow": 1,
                          "mscale": 0.707, "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096},
                         64, 163840, 16, 16, 1.0, "llama"),
    "deepseek-mscale-uneven": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "beta_fast": 32,
                                "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0,
                                "original_max_position_embeddings": 4096}, 64, 163840, 16, 16, 1.0, "llama"),
    "phi-3-mini-128k": ({"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 4096,
                         "short_factor": _longrope_factors(48, 3.0), "long_factor": _longrope_factors(48, 60.0)},
                        96, 131072, 32, 32, 1.0, "phi3"),
    "longchat-linear": ({"rope_type": "linear", "rope_theta": 10000.0, "factor": 8.0}, 128, 16384, 32, 32, 1.0,
                        "llama"),
    "dynamic-ntk": ({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}, 128, 4096, 32, 8, 1.0, "llama"),
    # Llama's default init ignores partial_rotary_factor; GPT-NeoX's (the partial-rotary models') honours it
    "phi-2-partial": ({"rope_type": "default", "rope_theta": 10000.0}, 80, 2048, 32, 32, 0.4, "gpt_neox"),
}


def _positions(name: str, t: int, gen) -> torch.Tensor:
    """Positions that exercise the recipe: past the original length for the length-switched ones."""
    params, _, max_pos = MODELS[name][:3]
    low = params.get("original_max_position_embeddings", max_pos) // 2
    high = min(max_pos, 2 * low + 1000) if params["rope_type"] in ("longrope", "dynamic") else low + 1000
    if params["rope_type"] == "dynamic":
        low, high = max_pos, 2 * max_pos  # beyond max_position_embeddings, where the base grows
    return torch.randint(low, high, (t,), generator=gen, device="cuda")


def _transformers_rotation(name: str, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
    """transformers' rotation of q and k [t, h, d] (fp32): its rotary module's cos and sin (attention factor
    included) for these positions, applied to the rotary part as the models do (the rest passes through)."""
    params, head_dim, max_pos, hq, _, partial, module = MODELS[name]
    params = copy.deepcopy(dict(params, partial_rotary_factor=partial))
    if module == "phi3":  # the original length at the top level of Phi3Config, as config.json has it
        original = params.pop("original_max_position_embeddings")
        config = transformers.Phi3Config(hidden_size=hq * head_dim, num_attention_heads=hq,
                                         max_position_embeddings=max_pos, original_max_position_embeddings=original,
                                         rope_parameters=params)
        rotary = Phi3RotaryEmbedding(config)
    elif module == "gpt_neox":
        config = transformers.GPTNeoXConfig(hidden_size=hq * head_dim, num_attention_heads=hq,
                                            max_position_embeddings=max_pos, rope_parameters=params)
        rotary = GPTNeoXRotaryEmbedding(config)
    else:
        config = transformers.LlamaConfig(hidden_size=hq * head_dim, num_attention_heads=hq, head_dim=head_dim,
                                          max_position_embeddings=max_pos, rope_parameters=params)
        rotary = LlamaRotaryEmbedding(config)
    rotary = rotary.to(q.device)
    rd = int(head_dim * partial)
    cos, sin = rotary(q.float(), positions[None])  # [1, t, rd]
    qr, kr = q.float()[..., :rd].transpose(0, 1)[None], k.float()[..., :rd].transpose(0, 1)[None]  # [1, h, t, rd]
    q_rot, k_rot = apply_rotary_pos_emb(qr, kr, cos, sin)
    return (torch.cat((q_rot[0].transpose(0, 1), q.float()[..., rd:]), dim=-1),
            torch.cat((k_rot[0].transpose(0, 1), k.float()[..., rd:]), dim=-1))


def _assert_near_transformers(what: str, got: torch.Tensor, hf: torch.Tensor, positions: torch.Tensor) -> None:
    # transformers forms angles in fp32 (position * inv_freq rounds to 2**-24 of the angle), the kernels in fp64;
    # bf16 outputs round once more
    angle_error = 4 * positions.max().item() * 2.0**-24
    tolerance = (angle_error + (2.0**-7 if got.dtype == torch.bfloat16 else 2.0**-20)) * hf.abs().max().item()
    err = (got.float() - hf).abs().max().item()
    assert err <= tolerance, f"{what}: {err:.3g} from transformers' result (tolerance {tolerance:.3g})"


def _case(name: str, t: int, dtype):
    """Random q, k [t, h, d] of the model's heads, positions, and rope's arguments from the model's recipe."""
    params, head_dim, max_pos, hq, hk, partial, _ = MODELS[name]
    gen = new_generator()
    q = torch.randn(t, hq, head_dim, generator=gen, device="cuda").to(dtype)
    k = torch.randn(t, hk, head_dim, generator=gen, device="cuda").to(dtype)
    positions = _positions(name, t, gen)
    recipe = cukiln.rope_recipe(params, head_dim=head_dim, max_position_embeddings=max_pos,
                                partial_rotary_factor=partial, seq_len=int(positions.max()) + 1, device="cuda")
    return q, k, positions, dict(positions=positions, layout="thd", **recipe)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_recipe_forward_matches_the_reference_and_transformers(name, dtype):
    q, k, positions, kw = _case(name, 200, dtype)
    outs = (torch.full_like(q, float("nan")), torch.full_like(k, float("nan")))
    got_q, got_k = cukiln.rope_qk(q, k, out=outs, **kw)
    ref_q, ref_k = cukiln.reference.rope_qk(q, k, **kw)
    assert_matches_reference(got_q, ref_q, f"{name} q")
    assert_matches_reference(got_k, ref_k, f"{name} k")
    hf_q, hf_k = _transformers_rotation(name, q, k, positions)
    _assert_near_transformers(f"{name} q", got_q, hf_q, positions)
    _assert_near_transformers(f"{name} k", got_k, hf_k, positions)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_recipe_backward_matches_the_reference_and_transformers(name, dtype):
    q, k, positions, kw = _case(name, 64, dtype)
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    out_q, out_k = ct.rope_qk(qg, kg, **kw)
    torch.autograd.backward((out_q, out_k), (gq, gk))
    assert_matches_reference(qg.grad, cukiln.reference.rope(gq, backward=True, **kw), f"{name} dq")
    assert_matches_reference(kg.grad, cukiln.reference.rope(gk, backward=True, **kw), f"{name} dk")
    # transformers' autograd through its formula, in fp32
    qh, kh = q.float().requires_grad_(), k.float().requires_grad_()
    hf_q, hf_k = _transformers_rotation(name, qh, kh, positions)
    torch.autograd.backward((hf_q, hf_k), (gq.float(), gk.float()))
    _assert_near_transformers(f"{name} dq", qg.grad, qh.grad, positions)
    _assert_near_transformers(f"{name} dk", kg.grad, kh.grad, positions)


def test_mscale_scales_every_angle_source_forward_and_backward():
    # the same rotation from inv_freq, base, freqs, cos/sin and the packed cache, each times mscale
    gen = new_generator()
    x = torch.randn(3, 5, 4, 64, generator=gen, device="cuda").to(torch.bfloat16)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, device="cuda", dtype=torch.float64) / 64))
    angles = torch.arange(16, device="cuda", dtype=torch.float64)[:, None] * inv
    sources = {"inv_freq": dict(inv_freq=inv.float()), "base": dict(base=10000.0),
               "freqs": dict(freqs=torch.cat((angles, angles), dim=1).float()),
               "cos/sin": dict(cos=angles.cos().float(), sin=angles.sin().float(), rotary_dim=64),
               "cos_sin_cache": dict(cos_sin_cache=torch.cat((angles.cos(), angles.sin()), dim=1).float())}
    for what, source in sources.items():
        for backward in (False, True):
            kw = dict(source, mscale=1.2079, backward=backward)
            out = torch.full_like(x, float("nan"))
            cukiln.rope(x, out=out, **kw)
            ref = cukiln.reference.rope(x, **kw)
            assert_matches_reference(out, ref, f"{what} backward={backward}")
            plain = cukiln.reference.rope(x, **dict(kw, mscale=1.0))
            torch.testing.assert_close(ref, plain * 1.2079, rtol=1e-12, atol=1e-12)
