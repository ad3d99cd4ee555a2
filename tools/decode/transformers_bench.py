"""`cukiln bench transformers` (GPU): Hugging Face transformers' greedy static-cache generation with cukiln
(`cukiln.integrations.transformers.apply`) against transformers' own SDPA path, eager and under transformers'
compiled decoding, on a model of Llama-3-8B's layer width reduced to 4 layers (random weights, bf16): batch 1 and
8, context 4k and 16k (random prompt tokens, no padding).

Per point, implementation and mode: the wall time of a generation of NEW_TOKENS tokens per generated token, and
the decode time per token: (the time of NEW_TOKENS tokens - the time of one, which is the prefill) / (NEW_TOKENS -
1). Each is the median of REPEATS generations after a warm-up one (which compiles, in compiled mode), on one
static cache sized for the longer generation and reset in between, so both generations take the same shapes. The
two implementations are measured A B B A at each point and mode, and the mean of both turns kept (each turn's
figures are recorded beside it). The
tokens of the two implementations are compared: greedy decoding of random weights meets near-ties in bf16, where
the two may pick different tokens and each goes on from its own, so the table shows how many steps every row's
tokens agree before the first such tie (the fraction of equal tokens is recorded beside it; neither is required).
"""

from __future__ import annotations

import itertools
import statistics
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..timing import run_metadata

LAYERS, VOCAB = 4, 32768
WIDTH = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8, head_dim=128)
POINTS = tuple(itertools.product((1, 8), (4096, 16384)))
QUICK_POINTS = ((1, 4096),)
NEW_TOKENS, QUICK_NEW_TOKENS = 32, 8
REPEATS = 5
MODES = ("eager", "compiled")
IMPLS = ("transformers sdpa", "cukiln")


def _model():
    import torch
    import transformers

    config = transformers.LlamaConfig(vocab_size=VOCAB, num_hidden_layers=LAYERS, max_position_embeddings=32768,
                                      rope_theta=500000.0, **WIDTH)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to("cuda").eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def _generate(model, ids, cache, new_tokens: int, compiled: bool):
    """Seconds of one greedy generation of ``new_tokens`` tokens on the (reset) static cache, and its tokens."""
    import torch

    from cukiln.integrations.transformers import cache_argument

    model.generation_config.disable_compile = not compiled
    cache.reset()
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **cache_argument(cache),
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    torch.cuda.synchronize()
    return time.perf_counter() - start, out[:, ids.shape[1]:]


def _measure(model, ids, new_tokens: int, compiled: bool) -> dict:
    import transformers

    cache = transformers.StaticCache(config=model.config, max_cache_len=ids.shape[1] + new_tokens)
    _generate(model, ids, cache, new_tokens, compiled)  # warm-up (compiles the decoding in compiled mode)
    _generate(model, ids, cache, 1, compiled)
    full, tokens = zip(*(_generate(model, ids, cache, new_tokens, compiled) for _ in range(REPEATS)))
    prefill = [_generate(model, ids, cache, 1, compiled)[0] for _ in range(REPEATS)]
    total, first = statistics.median(full), statistics.median(prefill)
    return {"ms_per_token": total / new_tokens * 1e3, "decode_ms_per_token": (total - first) / (new_tokens - 1) * 1e3,
            "prefill_ms": first * 1e3, "tokens": tokens[0]}


def run(console: Console, args) -> dict:
    import torch

    from cukiln.integrations import transformers as glue

    points = QUICK_POINTS if args.quick else POINTS
    new_tokens = QUICK_NEW_TOKENS if args.quick else NEW_TOKENS
    model = _model()
    gen = torch.Generator(device="cuda").manual_seed(1)
    prompts = {(b, ctx): torch.randint(3, VOCAB, (b, ctx), generator=gen, device="cuda") for b, ctx in points}
    rows = {(b, ctx): {"batch": b, "context": ctx} for b, ctx in points}
    tokens, times = {}, {}
    # the two implementations in turn, A B B A at every point and mode (the host's speed drifts, and decoding at
    # these sizes waits on the host): compiled, each implementation compiles once a point and its turns after the
    # first find their compiled code again
    order = [(p, mode, impl) for p in points for mode in MODES for impl in IMPLS + IMPLS[::-1]]
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("generations", total=len(order))
        for (b, ctx), mode, impl in order:
            (glue.apply if impl == "cukiln" else glue.remove)(model)
            result = _measure(model, prompts[b, ctx], new_tokens, mode == "compiled")
            tokens[b, ctx, mode, impl] = result.pop("tokens")
            times.setdefault((b, ctx, mode, impl), []).append(result)
            progress.advance(task)
    for (b, ctx, mode, impl), runs in times.items():
        entry = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        # each turn's own figures too: eager decoding waits on the host, whose speed drifts between turns
        rows[b, ctx].setdefault(mode, {})[impl] = {**entry, "turns": runs}
    for (b, ctx), mode in itertools.product(points, MODES):
        same = tokens[b, ctx, mode, "cukiln"] == tokens[b, ctx, mode, "transformers sdpa"]
        entry = rows[b, ctx][mode]
        entry["equal_token_fraction"] = same.float().mean().item()
        entry["steps_before_first_difference"] = steps_before_first_difference(same)
        entry["decode_speedup"] = (entry["transformers sdpa"]["decode_ms_per_token"]
                                   / entry["cukiln"]["decode_ms_per_token"])
    command = "cukiln bench transformers" + (" --quick" if args.quick else "")
    return {**run_metadata("transformers", command),
            "model": {"layers": LAYERS, "vocab": VOCAB, **WIDTH, "dtype": "bf16", "weights": "random"},
            "new_tokens": new_tokens, "repeats": REPEATS, "versions_transformers": _transformers_version(),
            "cases": list(rows.values())}


def steps_before_first_difference(same) -> list[int]:
    """Per row of ``same`` ([b, steps] bool, the two implementations' tokens equal): the steps before the first
    that differs (all of them where none does)."""
    import torch

    differs = ~same
    return torch.where(differs.any(dim=1), differs.int().argmax(dim=1), differs.shape[1]).tolist()


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def show(result: dict, console: Console) -> None:
    table = Table(title=f"transformers generation on {result['device']} (Llama-3-8B width, "
                        f"{result['model']['layers']} layers, bf16, {result['new_tokens']} new tokens): "
                        "ms per token, decode only / whole generation", title_justify="left")
    for col in ("b", "context", "mode", *IMPLS, "decode speedup", "same tokens for (worst row)"):
        table.add_column(col, justify="right")
    for case in result["cases"]:
        for mode in MODES:
            entry = case.get(mode)
            if entry is None:
                continue
            cells = [f"{entry[i]['decode_ms_per_token']:.2f} / {entry[i]['ms_per_token']:.2f}" for i in IMPLS]
            table.add_row(str(case["batch"]), str(case["context"]), mode, *cells, f"{entry['decode_speedup']:.2f}x",
                          _agreement(entry, result["new_tokens"]))
    console.print(table)
    console.print("greedy decoding of random weights meets bf16 near-ties; from the first, each implementation goes "
                  "on from its own token")


def _agreement(entry: dict, new_tokens: int) -> str:
    steps = entry.get("steps_before_first_difference")  # results written before it record the fraction alone
    return f"{min(steps)} of {new_tokens} steps" if steps else f"{entry['equal_token_fraction']:.0%} equal"
