"""Greedy generation with Hugging Face transformers, with and without cukiln: a small Llama-style model built from a
config (random weights, no download), a left-padded batch, a static cache; prints tokens per second and whether
the tokens agree.

    python examples/transformers_generate.py            # eager decoding
    python examples/transformers_generate.py --compile  # transformers' compiled static-cache decoding

cukiln's part is one line, ``cukiln.integrations.transformers.apply(model)``
(``pip install 'cukiln[transformers]'``).
"""

from __future__ import annotations

import argparse
import time

import torch
import transformers

import cukiln.integrations.transformers


def build() -> transformers.PreTrainedModel:
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                                      num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=8)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to("cuda").eval()
    model.generation_config.eos_token_id = None  # random weights: generate every requested token
    return model


def generate(model, ids, mask, new_tokens: int, compile: bool) -> tuple[torch.Tensor, float]:
    model.generation_config.disable_compile = not compile
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                  do_sample=False, cache_implementation="static", pad_token_id=0)
    model.generate(**kwargs)  # warm-up (and compilation)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(**kwargs)
    torch.cuda.synchronize()
    return out[:, ids.shape[1]:], ids.shape[0] * new_tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--compile", action="store_true", help="transformers' compiled static-cache decoding")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens generated per prompt (default 128)")
    args = parser.parse_args()
    if not torch.cuda.is_available():  # before the model is built: cukiln's kernels run on a CUDA GPU
        parser.exit(2, f"{parser.prog}: needs a CUDA GPU, and torch sees none\n")

    model = build()
    lengths = (300, 1000, 40, 700)  # prompts of different lengths, left-padded with token 0
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long, device="cuda")
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, -n:] = torch.randint(3, 32000, (n,), device="cuda")
        mask[i, -n:] = 1

    want, rate = generate(model, ids, mask, args.new_tokens, args.compile)
    print(f"transformers (sdpa): {rate:8.1f} tokens/s")
    cukiln.integrations.transformers.apply(model)  # the one line
    got, rate = generate(model, ids, mask, args.new_tokens, args.compile)
    print(f"with cukiln:         {rate:8.1f} tokens/s")
    # Greedy decoding of random weights meets bf16 near-ties, where the two may pick different tokens and each goes
    # on from its own choice: what compares them is how long each prompt's tokens agree before the first such tie.
    differs = got != want
    agree = torch.where(differs.any(dim=1), differs.int().argmax(dim=1), differs.shape[1])
    print("steps before the first different token, per prompt: "
          + ", ".join(f"{n} of {differs.shape[1]}" for n in agree.tolist()))


if __name__ == "__main__":
    main()
