"""`cukiln bench transformers-paged` (GPU): transformers' continuous batching (``model.generate_batch`` over its paged
cache) with cukiln (`cukiln.integrations.transformers.apply`: decode batches through cukiln's paged decode) against
transformers' own "paged|sdpa", on a 4-layer Llama-style model of hidden 2048 (random weights, bf16): CONCURRENT
requests at once, NEW_TOKENS new tokens each, prompts of PROMPT_LENGTHS tokens (seeded random lengths and tokens).

Per point and implementation: tokens per second, every request's new tokens over the wall time of one
``generate_batch`` (after a warm-up one), measured A B B A and the mean of both turns kept; and how many requests'
tokens equal transformers' (greedy decoding of random weights meets near-ties in bf16, where the two may part).
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from ..timing import run_metadata

LAYERS, VOCAB = 4, 32768
WIDTH = dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=16, num_key_value_heads=4, head_dim=128)
CONCURRENT, QUICK_CONCURRENT = (16, 64), (16,)
NEW_TOKENS, QUICK_NEW_TOKENS = 64, 16
PROMPT_LENGTHS = (64, 512)
IMPLS = ("transformers paged|sdpa", "cukiln")


def _model(cukiln: bool):
    import torch
    import transformers

    from cukiln.integrations import transformers as glue

    config = transformers.LlamaConfig(vocab_size=VOCAB, num_hidden_layers=LAYERS, max_position_embeddings=8192, **WIDTH)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to("cuda").eval()
    model.set_attn_implementation("sdpa" if cukiln else "paged|sdpa")
    if cukiln:
        glue.apply(model)  # generate_batch then switches it to "paged|cukiln"
    return model


def _prompts(n: int) -> list[list[int]]:
    import torch

    gen = torch.Generator().manual_seed(n)
    lengths = torch.randint(PROMPT_LENGTHS[0], PROMPT_LENGTHS[1] + 1, (n,), generator=gen)
    return [torch.randint(3, VOCAB, (int(m),), generator=gen).tolist() for m in lengths]


def _generate(model, prompts, new_tokens: int) -> tuple[float, list[list[int]]]:
    import torch
    import transformers

    config = transformers.GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                                           pad_token_id=0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate_batch(inputs=prompts, generation_config=config)
    torch.cuda.synchronize()
    return time.perf_counter() - start, [out[k].generated_tokens for k in sorted(out)]


def run(console: Console, args) -> dict:
    quick = args.quick
    new_tokens = QUICK_NEW_TOKENS if quick else NEW_TOKENS
    models = {name: _model(name == "cukiln") for name in IMPLS}
    rows = []
    for n in (QUICK_CONCURRENT if quick else CONCURRENT):
        prompts = _prompts(n)
        for model in models.values():
            _generate(model, prompts, new_tokens)  # warm-up
        seconds = {name: [] for name in IMPLS}
        tokens = {}
        for name in IMPLS + IMPLS[::-1]:  # A B B A
            s, tokens[name] = _generate(models[name], prompts, new_tokens)
            seconds[name].append(s)
        row = {"concurrent": n, "new_tokens": new_tokens, "seconds": seconds}
        for name in IMPLS:
            row[name] = {"tokens_per_s": n * new_tokens / (sum(seconds[name]) / len(seconds[name]))}
        row["speedup"] = row["cukiln"]["tokens_per_s"] / row[IMPLS[0]]["tokens_per_s"]
        row["requests_with_equal_tokens"] = sum(a == b for a, b in zip(tokens[IMPLS[0]], tokens["cukiln"]))
        rows.append(row)
    command = "cukiln bench transformers-paged" + (" --quick" if quick else "")
    return {**run_metadata("transformers-paged", command),
            "model": {"layers": LAYERS, "vocab": VOCAB, **WIDTH, "dtype": "bf16"},
            "prompt_lengths": list(PROMPT_LENGTHS), "cases": rows}


def show(result: dict, console: Console) -> None:
    table = Table(title=f"continuous batching on {result['device']}: tokens/s, {result['model']['layers']} layers of "
                        f"hidden {result['model']['hidden_size']}, prompts {result['prompt_lengths']}",
                  title_justify="left")
    for col in ("requests", "new tokens", *IMPLS, "cukiln / transformers", "requests with equal tokens"):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        table.add_row(str(r["concurrent"]), str(r["new_tokens"]), *(f"{r[n]['tokens_per_s']:.0f}" for n in IMPLS),
                      f"{r['speedup']:.2f}x", f"{r['requests_with_equal_tokens']} / {r['concurrent']}")
    console.print(table)
