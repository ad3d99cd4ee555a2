"""cukiln.integrations.transformers on the CPU: the glue (the decode step's lengths from transformers' mask
arguments, left padding, sliding-window caches, the logit softcap and scaling, RoPE on transformers' views) run
end to end in greedy static-cache generation of float32 models, with cukiln's float64 references standing in for
the kernels, against transformers' own eager attention (float32: its float64 eager masks overflow to NaN on padded
rows); and what it refuses."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import cukiln  # noqa: E402
from cukiln.integrations import transformers as glue  # noqa: E402

from .models import PAD, PROMPT_LENGTHS, STYLES, build, greedy, prompts  # noqa: E402


def _reference_decode(q, k_cache, v_cache, kv_lens, *, kv_start=None, scale=None, softcap=None, **scales):
    """The float64 decode reference on float32 inputs (it takes the kernels' types, float64 standing for them; FP8
    caches as they are, with their scales)."""
    k, v = (c if c.dtype == torch.float8_e4m3fn else c.double() for c in (k_cache, v_cache))
    return cukiln.reference.decode_attention(q.double(), k, v, kv_lens, kv_start=kv_start, scale=scale,
                                             softcap=softcap, **scales).to(q.dtype)


def _reference_rope_qk(q, k, **kwargs):
    return cukiln.reference.rope_qk(q, k, **kwargs)


@pytest.fixture
def float64_glue(monkeypatch):
    """The glue with float64 references in place of the kernels, taking float32 CPU tensors; the modeling modules'
    rotary functions restored afterwards."""
    import sys

    monkeypatch.setattr(glue, "HALVES", (torch.float16, torch.bfloat16, torch.float32))
    monkeypatch.setattr(glue, "DEVICE_TYPES", ("cuda", "cpu"))
    monkeypatch.setattr(glue, "decode_attention", _reference_decode)
    monkeypatch.setattr(glue, "rope_qk", _reference_rope_qk)
    for name in STYLES:
        modeling = __import__(f"transformers.models.{name}.modeling_{name}", fromlist=["x"])
        monkeypatch.setattr(modeling, "apply_rotary_pos_emb", modeling.apply_rotary_pos_emb)
    calls = {"decode": 0, "rope": 0}

    def counting(name, fn):
        def call(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return call

    monkeypatch.setattr(glue, "decode_attention", counting("decode", _reference_decode))
    monkeypatch.setattr(glue, "rope_qk", counting("rope", _reference_rope_qk))
    return calls


def _sharpened(style: str, **overrides):
    """A 2-layer float32 CPU model whose q and k projections are scaled up, so that its attention is sharp and
    its scaling and logit softcap change the result (random weights give near-uniform attention)."""
    model = build(style, torch.float32, "cpu", layers=2, **overrides)
    with torch.no_grad():
        for m in model.modules():
            if glue._is_attention(m):
                m.q_proj.weight.mul_(6.0)
                m.k_proj.weight.mul_(6.0)
                if hasattr(m, "sinks"):  # attention sinks that weigh (random ones are near 0): -3 ... 3 over the heads
                    m.sinks.copy_(torch.linspace(-3.0, 3.0, m.sinks.numel()))
    return model


# models whose rotary tables are half width (gpt-oss): rotates_half answers no, and the model keeps its own RoPE
OWN_ROTARY = ("gpt_oss",)


# Gemma-2 with its own scaling (query_pre_attn_scalar 256 against head dim 64) and a softcap that bites
OVERRIDES = {"gemma2": dict(query_pre_attn_scalar=256, attn_logit_softcapping=3.0)}


@pytest.mark.parametrize("cache", ["static", "dynamic", "dynamic without config"])
@pytest.mark.parametrize("style", sorted(STYLES))
def test_greedy_generation_matches_transformers_eager(style, cache, float64_glue):
    import transformers

    model = _sharpened(style, **OVERRIDES.get(style, {}))
    ids, mask = prompts("cpu")
    model.set_attn_implementation("eager")

    def cache_arg():  # a cache without its config keeps every key, sliding layers too
        return transformers.DynamicCache() if cache == "dynamic without config" else cache

    want_tokens, want_logits = greedy(model, ids, mask, 20, cache=cache_arg())
    glue.apply(model)
    got_tokens, got_logits = greedy(model, ids, mask, 20, cache=cache_arg())
    assert torch.equal(got_tokens, want_tokens)
    assert torch.allclose(got_logits, want_logits, rtol=1e-4, atol=1e-4)
    layers = model.config.num_hidden_layers
    # (a prompt of few tokens in a model without sliding windows goes through the decode kernels too)
    steps = 19 + glue.serves_query_tokens(model.config, ids.shape[1])
    assert float64_glue["decode"] == steps * layers, "every decode step of every layer went through the kernel"
    if style not in OWN_ROTARY:
        assert float64_glue["rope"] == 20 * layers, "every forward's RoPE went through the kernel"


def test_remove_puts_back_the_models_attention_and_the_rotary_function(float64_glue):
    from transformers.models.llama import modeling_llama

    model = build("llama", torch.float32, "cpu", layers=1)
    model.set_attn_implementation("eager")
    original = modeling_llama.apply_rotary_pos_emb
    glue.apply(model)
    assert model.config._attn_implementation == glue.NAME
    assert modeling_llama.apply_rotary_pos_emb.cukiln_original is original
    glue.apply(model)  # twice: still one wrapper, and remove still knows the model's own implementation
    glue.remove(model)
    assert model.config._attn_implementation == "eager" and modeling_llama.apply_rotary_pos_emb is original


def test_only_the_rotate_half_formula_on_q_and_k_is_replaced():
    from transformers.models.llama import modeling_llama

    assert glue.rotates_half(modeling_llama.apply_rotary_pos_emb)

    def interleaved(q, k, cos, sin, unsqueeze_dim=1):  # pairs (2i, 2i + 1), as Cohere's
        def rot(x):
            return torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return q * cos + rot(q) * sin, k * cos + rot(k) * sin

    def one_tensor(x, cos, sin, unsqueeze_dim=1):  # Gemma-3n's signature
        return x * cos.unsqueeze(unsqueeze_dim)

    assert not glue.rotates_half(interleaved) and not glue.rotates_half(one_tensor)


def test_decode_lengths_read_left_padding_and_the_cache_length():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.bool)
    got = glue.decode_lengths(3, torch.tensor(4), mask, "cpu")
    assert got.shape == (2, 3, 1, 1) and got.dtype == torch.int32 and glue.is_decode_lengths(got)
    assert got[0].flatten().tolist() == [2, 0, 4] and got[1].flatten().tolist() == [5, 5, 5]
    plain = glue.decode_lengths(2, 7, None, "cpu")
    assert plain[0].flatten().tolist() == [0, 0] and plain[1].flatten().tolist() == [8, 8]
    assert not glue.is_decode_lengths(torch.zeros(2, 3, 1, 1)), "a float mask is a mask"


def test_sliding_window_layers_attend_to_the_window_the_cache_holds(float64_glue):
    class Sliding(torch.nn.Module):
        sliding_window = 4

    q = torch.randn(2, 2, 1, 64, dtype=torch.float64)
    window = torch.randn(2, 1, 4, 64, dtype=torch.float64), torch.randn(2, 1, 4, 64, dtype=torch.float64)
    # row 0: 9 tokens, 6 of them padding: positions 5..8 in the window, the first valid (6) at slot 1;
    # row 1: 3 tokens, no padding, not yet full: slots 0..2
    lengths = torch.tensor([[6, 0], [9, 3]], dtype=torch.int32)[:, :, None, None]
    got = glue.attention(Sliding(), q, *window, lengths, scaling=0.125)[0]
    want0 = cukiln.reference.decode_attention(q[:1, :, 0], window[0][:1], window[1][:1], 4, kv_start=1, scale=0.125)
    want1 = cukiln.reference.decode_attention(q[1:, :, 0], window[0][1:], window[1][1:], 3, scale=0.125)
    assert torch.allclose(got[:, 0], torch.cat((want0, want1)))
    # the window as an argument (Mistral) over a cache that keeps every key: row 0 attends to [6, 9), the window
    # [5, 9) without its padding
    everything = torch.randn(2, 1, 9, 64, dtype=torch.float64), torch.randn(2, 1, 9, 64, dtype=torch.float64)
    got = glue.attention(torch.nn.Module(), q, *everything, lengths, scaling=0.125, sliding_window=4)[0]
    want0 = cukiln.reference.decode_attention(q[:1, :, 0], everything[0][:1], everything[1][:1], 9, kv_start=6,
                                              scale=0.125)
    assert torch.allclose(got[:1, 0], want0)


def test_right_padding_and_unsupported_models_are_refused_naming_the_feature(monkeypatch):
    with pytest.raises(ValueError, match="left-padded"):
        glue.check_left_padding(torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool))
    glue.check_left_padding(torch.tensor([[0, 1, 1], [1, 1, 1]], dtype=torch.bool))
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        glue.apply(build("llama", torch.float32, "cpu", layers=1))  # (the fixture-free glue: halves only)
    import transformers

    odd = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(
        vocab_size=64, hidden_size=72, intermediate_size=64, num_hidden_layers=1, num_attention_heads=1,
        num_key_value_heads=1), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="head dim 72"):
        glue.apply(odd)
    with pytest.raises(ValueError, match="no transformers attention layer"):
        glue.apply(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="CUDA devices"):
        glue.apply(build("llama", torch.bfloat16, "cpu", layers=1))
    cohere = transformers.AutoModelForCausalLM.from_config(transformers.CohereConfig(
        vocab_size=64, hidden_size=128, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="model type 'cohere'"):
        glue.apply(cohere)
    monkeypatch.setattr(glue, "DEVICE_TYPES", ("cuda", "cpu"))
    chunked = build("llama", torch.bfloat16, "cpu", layers=1)
    chunked.config.attention_chunk_size = 8
    with pytest.raises(ValueError, match="chunked attention"):
        glue.apply(chunked)


def test_attention_weights_are_refused_in_decode_and_prefill():
    lengths = torch.tensor([[0], [3]], dtype=torch.int32)[:, :, None, None]
    q, k = torch.zeros(1, 2, 1, 64, dtype=torch.bfloat16), torch.zeros(1, 1, 4, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="output_attentions"):
        glue.attention(torch.nn.Module(), q, k, k, lengths, output_attentions=True)
    with pytest.raises(ValueError, match="output_attentions"):
        glue.attention(torch.nn.Module(), q.expand(1, 2, 4, 64), k, k, None, output_attentions=True)
    assert not glue.is_decode_lengths(lengths, batch=2), "lengths of another batch are not the step's"


def test_prompt_lengths_fit_the_batch():
    ids, mask = prompts("cpu")
    assert mask.sum(-1).tolist() == list(PROMPT_LENGTHS) and (ids[mask == 0] == 0).all()


def _fake_quantized_cache(model, max_cache_len: int):
    import transformers
    from transformers.cache_utils import StaticLayer

    class Layer(StaticLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.scales = tuple(cukiln.kv_scales(x, head_axis=1) for x in (key_states, value_states))
            # the dequantized values in the states' dtype (a bf16 model's cache holds bf16)
            k, v = ((glue.quantized(x, s).float() * s.view(1, -1, 1, 1)).to(x.dtype)
                    for x, s in zip((key_states, value_states), self.scales))
            return super().update(k, v, *args, **kwargs)

    cache = transformers.StaticCache(config=model.config, max_cache_len=max_cache_len)
    cache.layers = [Layer(max_cache_len) for _ in cache.layers]
    return cache


def test_an_fp8_cache_decodes_what_its_dequantized_values_give_in_transformers_eager(float64_glue):
    """Greedy generation with Fp8StaticCache through the glue (decode: cukiln's FP8 decode reference over the e4m3
    bytes and scales; prefill: transformers' path on the dequantized cache) against transformers' eager attention on a
    cache holding the same dequantized values."""
    model = _sharpened("llama")
    ids, mask = prompts("cpu")
    model.set_attn_implementation("eager")
    want_tokens, want_logits = greedy(model, ids, mask, 12, cache=_fake_quantized_cache(model, 40))
    glue.apply(model)
    cache = glue.Fp8StaticCache(model.config, max_cache_len=40)
    got_tokens, got_logits = greedy(model, ids, mask, 12, cache=cache)
    assert cache.layers[0].keys.dtype == torch.float8_e4m3fn and cache.layers[0].keys.cukiln_scale.shape == (2,)
    assert torch.equal(got_tokens, want_tokens)
    assert torch.allclose(got_logits, want_logits, rtol=1e-4, atol=1e-4)
    steps = 11 + glue.serves_query_tokens(model.config, ids.shape[1])  # (the prompt's step too, where few enough)
    assert float64_glue["decode"] == steps * model.config.num_hidden_layers


def test_an_fp8_cache_refuses_sliding_window_layers():
    model = build("mistral", torch.float32, "cpu", layers=2)
    with pytest.raises(ValueError, match="Fp8StaticCache: the model has sliding-window layers"):
        glue.Fp8StaticCache(model.config, max_cache_len=16)


def test_assisted_generation_verifies_its_drafts_through_cukiln(float64_glue):
    """Greedy assisted generation (a 1-layer draft model proposing tokens, the model verifying several a step) through
    the glue gives plain greedy generation's tokens, and its verification steps (several query tokens a row) go through
    cukiln's decode."""
    model = _sharpened("llama")
    draft = build("llama", torch.float32, "cpu", layers=1, seed=5)
    ids, mask = prompts("cpu")
    ids, mask = ids[:1, -PROMPT_LENGTHS[0]:], mask[:1, -PROMPT_LENGTHS[0]:]  # (assisted generation takes one row)
    model.set_attn_implementation("eager")
    want, _ = greedy(model, ids, mask, 16, cache="dynamic")
    glue.apply(model)
    seen = []
    counting = glue.decode_attention

    def recording(q, *args, **kwargs):
        seen.append(q.shape[1] if q.ndim == 4 else 1)
        return counting(q, *args, **kwargs)

    glue.decode_attention = recording
    try:
        out = model.generate(input_ids=ids, attention_mask=mask, assistant_model=draft, max_new_tokens=16,
                             min_new_tokens=16, do_sample=False, pad_token_id=PAD)
    finally:
        glue.decode_attention = counting
    assert torch.equal(out[:, ids.shape[1]:], want)
    assert any(n > 1 for n in seen), "a verification step of several tokens went through cukiln"
