"""transformers' continuous batching through cukiln on the CPU (the float64 references in place of the kernels): a model
on "cukiln" generates with ``generate_batch`` the tokens it generates on transformers' own "paged|sdpa", and every
decode step of every layer goes through cukiln's paged decode. Runs where the installed transformers' paged cache hands
the attention the cache with its read and write indices (the form integrations/transformers_paged.py serves)."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
cache_module = pytest.importorskip("transformers.generation.continuous_batching.cache")

import cukiln  # noqa: E402
from cukiln.integrations import transformers as glue  # noqa: E402

from .models import build  # noqa: E402
from .test_transformers_glue import float64_glue  # noqa: E402,F401  (a fixture)

if "read_index" not in inspect.signature(cache_module.PagedAttentionCache.update).parameters:
    pytest.skip(f"transformers {transformers.__version__}: its continuous batching hands the attention no read and "
                "write indices (the form cukiln serves is 5.17's)", allow_module_level=True)

NEW_TOKENS = 12


def _generate(style: str, implementation: str, apply: bool) -> list[list[int]]:
    model = build(style, torch.float32, "cpu", layers=2)
    with torch.no_grad():  # sharp attention (random weights give near-uniform attention)
        for m in model.modules():
            if glue._is_attention(m):
                m.q_proj.weight.mul_(6.0)
                m.k_proj.weight.mul_(6.0)
    model.set_attn_implementation(implementation)
    if apply:
        glue.apply(model)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 256, (n,), generator=gen).tolist() for n in (5, 9, 3, 12)]
    config = transformers.GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                                           pad_token_id=0)
    batching = transformers.ContinuousBatchingConfig(block_size=16, num_blocks=64, max_batch_tokens=64)
    out = model.generate_batch(inputs=prompts, generation_config=config, continuous_batching_config=batching)
    return [out[k].generated_tokens for k in sorted(out)]


@pytest.mark.parametrize("style", ["llama", "qwen2"])
def test_generate_batch_through_cukiln_gives_transformers_paged_sdpa_tokens(style, float64_glue, monkeypatch):
    # (continuous batching sizes its pool from the device's free memory, which it reads as 0 on the CPU)
    monkeypatch.setattr(cache_module.PagedAttentionMemoryHandler, "get_available_memory", lambda self: 2**30)
    want = _generate(style, "paged|sdpa", apply=False)
    got = _generate(style, "sdpa", apply=True)  # generate_batch switches a "cukiln" model to "paged|cukiln"
    assert got == want and all(len(t) == NEW_TOKENS for t in got)
    assert float64_glue["decode"] == (NEW_TOKENS - 1) * 2, "every decode step of every layer went through cukiln"
