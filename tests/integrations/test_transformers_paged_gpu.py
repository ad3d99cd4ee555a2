"""transformers' continuous batching through cukiln on the GPU: a Llama-style and a Qwen2-style model (random weights, bf16)
generate with ``generate_batch`` on "paged|cukiln"; every decode step of every full-attention layer runs cukiln's paged
decode, and every step's log-probability of its token agrees with transformers' SDPA over the request's tokens (teacher
forcing), each token its reference's greedy choice up to a bf16 near-tie.

The bound: the static-cache tests hold bf16 logits within 3 % of the largest logit of the two paths; a token's
log-probability ℓ_t − logsumexp(ℓ) moves by at most |Δℓ_t| + max|Δℓ| (logsumexp moves no more than the largest logit
change), so within twice that."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
cache_module = pytest.importorskip("transformers.generation.continuous_batching.cache")

from cukiln.integrations import transformers as glue  # noqa: E402

from .models import build  # noqa: E402

pytestmark = pytest.mark.gpu

if "read_index" not in inspect.signature(cache_module.PagedAttentionCache.update).parameters:
    pytest.skip(f"transformers {transformers.__version__}: its continuous batching hands the attention no read and "
                "write indices (the form cukiln serves is 5.17's)", allow_module_level=True)

NEW_TOKENS = 24
PROMPT_LENGTHS = (5, 40, 3, 17, 64, 9)


def teacher_forced(model, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """The model's logits [steps, vocab] at each generated step, the request's tokens fed in one forward."""
    ids = torch.tensor([prompt + tokens[:-1]], device="cuda")
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:]
    return logits.float()


@pytest.mark.parametrize("style", ["llama", "qwen2"])
def test_continuous_batching_through_cukiln_agrees_with_sdpa_under_teacher_forcing(style, monkeypatch):
    model = build(style, torch.bfloat16, "cuda")
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 256, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]
    model.set_attn_implementation("sdpa")
    glue.apply(model)  # generate_batch switches a "cukiln" model to "paged|cukiln"
    paged_calls, kernel = [], glue.decode_attention

    def recording(*args, **kwargs):
        paged_calls.append(kwargs.get("block_table") is not None)
        return kernel(*args, **kwargs)

    monkeypatch.setattr(glue, "decode_attention", recording)
    config = transformers.GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                                           pad_token_id=0)
    batching = transformers.ContinuousBatchingConfig(block_size=16, num_blocks=128, max_batch_tokens=128,
                                                     return_logprobs=True)
    out = model.generate_batch(inputs=prompts, generation_config=config, continuous_batching_config=batching)
    assert paged_calls and all(paged_calls), "the decode steps went through cukiln's paged decode"
    glue.remove(model, "sdpa")
    by_prompt = {tuple(r.prompt_ids): r for r in out.values()}
    for prompt in prompts:
        r = by_prompt[tuple(prompt)]
        assert len(r.generated_tokens) == NEW_TOKENS and len(r.logprobs) == NEW_TOKENS
        logits = teacher_forced(model, prompt, r.generated_tokens)
        tol = 0.03 * logits.abs().max().item()
        tokens = torch.tensor(r.generated_tokens, device="cuda")
        want = torch.log_softmax(logits, -1).gather(1, tokens[:, None])[:, 0]
        err = (torch.tensor(r.logprobs, device="cuda") - want).abs().max().item()
        assert err <= 2 * tol, f"prompt of {len(prompt)}: a step's log-probability off by {err:.3g} > {2 * tol:.3g}"
        # each token is the reference's greedy choice, or within a near-tie of it
        shortfall = (logits.max(-1).values - logits.gather(1, tokens[:, None])[:, 0]).max().item()
        assert shortfall <= 2 * tol, f"prompt of {len(prompt)}: a token {shortfall:.3g} below the reference's best"
