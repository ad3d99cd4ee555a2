"""cukiln.integrations.transformers on the GPU: greedy static-cache generation of 48 new tokens for a left-padded
batch of 4 prompts of different lengths, on small random-initialized models of three styles (Llama: GQA, head dim
64; Qwen2: head dim 128; Gemma-2: logit softcap and sliding window), eager and under transformers' compiled
decoding, against transformers' own path (SDPA; eager for Gemma-2, whose softcap SDPA drops). Tokens agree up to
bf16 near-ties: before the first differing token every step's logits agree within the tolerance, and where a token
differs the reference's top two logits were within it."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from cukiln import native  # noqa: E402
from cukiln.integrations import transformers as glue  # noqa: E402

from .models import build, greedy, prompts, teacher_forced_logits  # noqa: E402

pytestmark = pytest.mark.gpu

NEW_TOKENS = 48
# the native plans of cukiln::decode_attention's calls: the op's, and its variants' (out= given, no lse)
DECODE_VARIANTS = ("decode_attention", "decode_attention#no_lse", "decode_attention#out", "decode_attention#out#no_lse")
REFERENCE = {"llama": "sdpa", "qwen2": "sdpa", "gemma2": "eager"}


@pytest.fixture
def restored_rotary(monkeypatch):
    """The modeling modules' rotary functions as they were, after the test (apply replaces them process-wide)."""
    for style in REFERENCE:
        modeling = __import__(f"transformers.models.{style}.modeling_{style}", fromlist=["x"])
        monkeypatch.setattr(modeling, "apply_rotary_pos_emb", modeling.apply_rotary_pos_emb)
    return sys.modules


def assert_same_tokens_up_to_near_ties(got_tokens, got_logits, want_tokens, want_logits):
    """Per row: equal tokens, or equal up to a step where the reference's top-2 margin is within the tolerance,
    with every earlier step's logits within it."""
    tol = 0.03 * want_logits.abs().max().item()
    for row in range(want_tokens.shape[0]):
        differs = (got_tokens[row] != want_tokens[row]).nonzero()
        first = NEW_TOKENS if differs.numel() == 0 else int(differs[0])
        if first:
            err = (got_logits[:first, row] - want_logits[:first, row]).abs().max().item()
            assert err <= tol, f"row {row}: logits off by {err:.3g} > {tol:.3g} before step {first}"
        if first < NEW_TOKENS:
            top2 = want_logits[first, row].topk(2).values
            margin = (top2[0] - top2[1]).item()
            assert margin <= tol, f"row {row}: tokens differ at step {first}, not a near-tie (margin {margin:.3g})"


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("style", sorted(REFERENCE))
def test_greedy_generation_matches_transformers(style, compiled, restored_rotary):
    model = build(style, torch.bfloat16, "cuda")
    ids, mask = prompts("cuda")
    model.set_attn_implementation(REFERENCE[style])
    want_tokens, want_logits = greedy(model, ids, mask, NEW_TOKENS)
    glue.apply(model)
    module = native.module()
    if module is not None:  # plans dropped: cukiln's first decode call is a miss, which its Python kernel serves
        module.clear()
        served = sum(module.python_count(v) for v in DECODE_VARIANTS)
    got_tokens, got_logits = greedy(model, ids, mask, NEW_TOKENS, compile=compiled)
    if module is not None:  # else the comparison below could hold transformers' own path against itself
        assert sum(module.python_count(v) for v in DECODE_VARIANTS) > served, "cukiln's decode attention never ran"
    assert torch.isfinite(got_logits).all()
    assert_same_tokens_up_to_near_ties(got_tokens, got_logits, want_tokens, want_logits)


def test_rope_on_transformers_views_equals_its_formula(restored_rotary):
    from transformers.models.llama import modeling_llama

    gen = torch.Generator(device="cuda").manual_seed(0)
    b, s, hq, hkv, d = 3, 5, 8, 2, 64
    q = torch.randn(b, s, hq, d, generator=gen, device="cuda").to(torch.bfloat16).transpose(1, 2)
    k = torch.randn(b, s, hkv, d, generator=gen, device="cuda").to(torch.bfloat16).transpose(1, 2)
    angles = torch.rand(b, s, d // 2, generator=gen, device="cuda") * 100
    cos, sin = (f(torch.cat((angles, angles), -1)).to(torch.bfloat16) for f in (torch.cos, torch.sin))
    want = modeling_llama.apply_rotary_pos_emb(q.float(), k.float(), cos.float(), sin.float())
    got = glue.rotate(q.clone(), k.clone(), cos, sin)
    for g, w in zip(got, want):
        assert g.shape == w.shape and (g.float() - w).abs().max().item() <= 0.02


def test_an_fp8_cache_generates_as_sdpa_over_its_dequantized_values(restored_rotary):
    """Greedy generation over Fp8StaticCache (cukiln's FP8 decode kernels) against transformers' SDPA over a static
    cache holding the same dequantized values (the CPU test's comparison, on the kernels)."""
    from .test_transformers_glue import _fake_quantized_cache

    model = build("llama", torch.bfloat16, "cuda")
    ids, mask = prompts("cuda")
    model.set_attn_implementation("sdpa")
    want_tokens, want_logits = greedy(model, ids, mask, NEW_TOKENS, cache=_fake_quantized_cache(model, 64))
    glue.apply(model)
    cache = glue.Fp8StaticCache(model.config, max_cache_len=64)
    got_tokens, got_logits = greedy(model, ids, mask, NEW_TOKENS, cache=cache)
    assert cache.layers[0].keys.dtype == torch.float8_e4m3fn
    assert_same_tokens_up_to_near_ties(got_tokens, got_logits, want_tokens, want_logits)


def test_assisted_generation_verifies_its_drafts_through_cukiln(restored_rotary, monkeypatch):
    """Greedy assisted generation (a 1-layer draft model) through cukiln against plain greedy generation over SDPA: the
    same tokens up to bf16 near-ties, the verification steps (several query tokens a row) through cukiln's kernels."""
    model = build("llama", torch.bfloat16, "cuda")
    draft = build("llama", torch.bfloat16, "cuda", layers=1, seed=5)
    ids, mask = prompts("cuda")
    ids, mask = ids[:1, -5:], mask[:1, -5:]  # (assisted generation takes one row)
    model.set_attn_implementation("sdpa")
    want_tokens, want_logits = greedy(model, ids, mask, NEW_TOKENS, cache="dynamic")
    glue.apply(model)
    seen, kernel = [], glue.decode_attention

    def recording(q, *args, **kwargs):
        seen.append(q.shape[1] if q.ndim == 4 else 1)
        return kernel(q, *args, **kwargs)

    monkeypatch.setattr(glue, "decode_attention", recording)
    out = model.generate(input_ids=ids, attention_mask=mask, assistant_model=draft, max_new_tokens=NEW_TOKENS,
                         min_new_tokens=NEW_TOKENS, do_sample=False, output_logits=True,
                         return_dict_in_generate=True, pad_token_id=0)
    got_tokens, got_logits = out.sequences[:, ids.shape[1]:], torch.stack(out.logits).float()
    assert_same_tokens_up_to_near_ties(got_tokens, got_logits, want_tokens, want_logits)
    assert any(n > 1 for n in seen), "a verification step of several tokens went through cukiln"
    # every step's logits (the verification steps' among them) against transformers' own attention over the same
    # tokens: teacher forcing, past any near-tie where the two generations part
    glue.remove(model, "sdpa")
    assert_logits_agree(got_logits, teacher_forced_logits(model, ids, mask, got_tokens))


def assert_logits_agree(got_logits, want_logits):
    """Every step's logits within the bf16 tolerance of the near-tie test (3 % of the largest logit)."""
    tol = 0.03 * want_logits.abs().max().item()
    err = (got_logits - want_logits).abs().max().item()
    assert err <= tol, f"logits off by {err:.3g} > {tol:.3g}"


def test_a_model_with_attention_sinks_generates_through_cukiln(restored_rotary, monkeypatch):
    """gpt-oss (random weights, sinks from -3 to 3 over the heads so that they weigh; sliding and full layers): greedy
    generation through cukiln, its decode steps with their sinks on cukiln's kernels, every step's logits against
    transformers' eager attention (which takes the sinks) under teacher forcing."""
    # every expert taken (top 4 of 4): the routing then moves continuously with the attention's output, so that bf16
    # roundings cannot switch a token's experts between the two paths (a near-tie of the router's top 2 would)
    model = build("gpt_oss", torch.bfloat16, "cuda", num_experts_per_tok=4)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(getattr(m, "sinks", None), torch.Tensor):
                m.sinks.copy_(torch.linspace(-3.0, 3.0, m.sinks.numel()))
    ids, mask = prompts("cuda")
    model.set_attn_implementation("eager")
    glue.apply(model)
    sinks_seen, kernel = [], glue.decode_attention

    def recording(*args, **kwargs):
        sinks_seen.append(kwargs.get("sinks") is not None)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(glue, "decode_attention", recording)
    got_tokens, got_logits = greedy(model, ids, mask, NEW_TOKENS)
    assert sinks_seen and all(sinks_seen), "every decode step through cukiln carried the layer's sinks"
    glue.remove(model, "eager")
    assert_logits_agree(got_logits, teacher_forced_logits(model, ids, mask, got_tokens))
