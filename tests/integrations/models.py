"""Small random-initialized transformers models in the three styles cukiln's integration is tested on, and a
left-padded batch of prompts of different lengths (shared by the CPU and GPU tests)."""

from __future__ import annotations

import torch

from cukiln.integrations.transformers import cache_argument

# style -> (config class name, config arguments): GQA with head dim 64; head dim 128; logit softcap, a scaling of
# its own and sliding window (alternating sliding and full layers); the GPU tests take the first three, the CPU
# tests all: Mistral's window comes as an attention argument, Qwen3 normalizes q and k per head
STYLES = {
    "llama": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=8,
                                  num_key_value_heads=2, head_dim=64)),
    "qwen2": ("Qwen2Config", dict(hidden_size=256, intermediate_size=512, num_attention_heads=2,
                                  num_key_value_heads=1)),
    "gemma2": ("Gemma2Config", dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=64, sliding_window=8,
                                    attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                                    query_pre_attn_scalar=64)),
    "mistral": ("MistralConfig", dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=64, sliding_window=8)),
    "qwen3": ("Qwen3Config", dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=64)),
    # attention sinks (a logit per head in the softmax's denominator), sliding and full layers, experts
    "gpt_oss": ("GptOssConfig", dict(hidden_size=256, intermediate_size=256, num_attention_heads=4,
                                     num_key_value_heads=2, head_dim=64, sliding_window=8, num_local_experts=4,
                                     num_experts_per_tok=2)),
}
GPU_STYLES = ("llama", "qwen2", "gemma2")
PROMPT_LENGTHS = (5, 11, 3, 8)
PAD = 0


def build(style: str, dtype, device, layers: int = 4, vocab: int = 256, seed: int = 0, **overrides):
    """A model of ``style`` with random weights (seeded), in ``dtype`` on ``device``, eval mode; ``overrides``
    change its config arguments."""
    import transformers

    name, kwargs = STYLES[style]
    config = getattr(transformers, name)(vocab_size=vocab, num_hidden_layers=layers, pad_token_id=PAD,
                                         bos_token_id=1, eos_token_id=2, **{**kwargs, **overrides})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()
    model.generation_config.eos_token_id = None  # always generate the requested number of tokens
    return model


def prompts(device, vocab: int = 256, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of len(PROMPT_LENGTHS) prompts, left-padded with PAD."""
    gen = torch.Generator().manual_seed(seed)
    width = max(PROMPT_LENGTHS)
    ids = torch.full((len(PROMPT_LENGTHS), width), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(PROMPT_LENGTHS):
        ids[i, width - n:] = torch.randint(3, vocab, (n,), generator=gen)
        mask[i, width - n:] = 1
    return ids.to(device), mask.to(device)


def greedy(model, ids, mask, new_tokens: int, compile: bool = False, cache="static"):
    """Greedy generation on a static cache (or "dynamic", or a Cache object): (new tokens [b, new_tokens], the
    logits of each step [steps, b, vocab])."""
    model.generation_config.disable_compile = not compile
    how = {"cache_implementation": "static"} if cache == "static" else {} if cache == "dynamic" else \
        cache_argument(cache)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                         do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=PAD, **how)
    return out.sequences[:, ids.shape[1]:], torch.stack(out.logits).float()


def teacher_forced_logits(model, ids, mask, tokens) -> torch.Tensor:
    """The logits the model gives at each generated step with ``tokens`` [b, steps] fed in after the prompt, in one
    forward (positions from the mask, as generate counts them): [steps, b, vocab], as greedy returns them."""
    full = torch.cat([ids, tokens[:, :-1]], dim=1)
    full_mask = torch.cat([mask, torch.ones_like(tokens[:, :-1])], dim=1)
    positions = (full_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=full, attention_mask=full_mask, position_ids=positions).logits
    return logits[:, ids.shape[1] - 1:].transpose(0, 1).float()
