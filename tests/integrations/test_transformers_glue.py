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

from .models import PROMPT_LENGTHS, STYLES, build, greedy, prompts  # noqa: E402


def _reference_decode(q, k_cache, v_cache, kv_lens, *, kv_start=None, scale=None, softcap=None):
    """The float64 decode reference on float32 inputs (it takes the kernels' types, float64 standing for them)."""
    return cukiln.reference.decode_attention(q.double(), k_cache.double(), v_cache.double(), kv_lens,
                                             kv_start=kv_start, scale=scale, softcap=softcap).to(q.dtype)


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
    for name in ("llama", "qwen2", "gemma2"):
        modeling = sys.modules[f"transformers.models.{name}.modeling_{name}"] if (
            f"transformers.models.{name}.modeling_{name}" in sys.modules) else __import__(
            f"transformers.models.{name}.modeling_{name}", fromlist=["x"])
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


@pytest.mark.parametrize("style", sorted(STYLES))
def test_greedy_static_generation_matches_transformers_eager(style, float64_glue):
    model = build(style, torch.float32, "cpu", layers=2)
    ids, mask = prompts("cpu")
    model.set_attn_implementation("eager")
    want_tokens, want_logits = greedy(model, ids, mask, 20)
    glue.apply(model)
    got_tokens, got_logits = greedy(model, ids, mask, 20)
    assert torch.equal(got_tokens, want_tokens)
    assert torch.allclose(got_logits, want_logits, rtol=1e-4, atol=1e-4)
    layers = model.config.num_hidden_layers
    assert float64_glue["decode"] == 19 * layers, "every decode step of every layer went through the kernel"
    assert float64_glue["rope"] == 20 * layers, "every forward's RoPE went through the kernel"


def test_remove_puts_back_transformers_attention_and_rotary_function(float64_glue):
    from transformers.models.llama import modeling_llama

    model = build("llama", torch.float32, "cpu", layers=1)
    original = modeling_llama.apply_rotary_pos_emb
    glue.apply(model)
    assert model.config._attn_implementation == glue.NAME
    assert modeling_llama.apply_rotary_pos_emb.cukiln_original is original
    glue.remove(model)
    assert model.config._attn_implementation == "sdpa" and modeling_llama.apply_rotary_pos_emb is original


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


def test_right_padding_and_unsupported_models_are_refused_naming_the_feature():
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


def test_decode_refuses_to_return_attention_weights():
    lengths = torch.tensor([[0], [3]], dtype=torch.int32)[:, :, None, None]
    q, k = torch.zeros(1, 2, 1, 64, dtype=torch.bfloat16), torch.zeros(1, 1, 4, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="output_attentions"):
        glue.attention(torch.nn.Module(), q, k, k, lengths, output_attentions=True)


def test_prompt_lengths_fit_the_batch():
    ids, mask = prompts("cpu")
    assert mask.sum(-1).tolist() == list(PROMPT_LENGTHS) and (ids[mask == 0] == 0).all()
