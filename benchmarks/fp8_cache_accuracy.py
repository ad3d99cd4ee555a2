"""FP8 (e4m3) KV caches against 16-bit ones in a Llama-style model run through cukiln's transformers integration: the
logits of every teacher-forced decode step with each cache, at short and at long positions, beside the logits of
caches perturbed by what e4m3's rounding allows (each key and value times 1 + e, e uniform in [-2^-4, 2^-4]: the bound
of its rounding of normal numbers, docs/guide.md's error model) — the prediction the FP8 cache is held to — and of
caches with the keys alone, or the values alone, rounded as FP8.

    python benchmarks/fp8_cache_accuracy.py [--device cuda|cpu] [--long N] [--out JSON]

On a GPU the kernels run (a bf16 model); on the CPU the float64 references stand in for them (a float32 model), as
the integration's CPU tests run it: FP8's arithmetic is the references' too (the GPU tests hold the kernels to them),
so the rounding of the caches, not the device, sets what this measures. The model has random weights (configs only),
its q and k projections scaled up so that its attention is not near-uniform (which would hide K's rounding).
"""

from __future__ import annotations

import argparse
import json
import math

import torch

ROUNDING = 2.0 ** -4  # e4m3 keeps 3 mantissa bits: half a step is 2^-4 of a normal value
STEPS = 64
NOISE_DRAWS = 3


def build(device: str):
    import transformers

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                      num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                                      max_position_embeddings=65536, rope_theta=1e6)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(4.0)
            layer.self_attn.k_proj.weight.mul_(4.0)
    return model


def use_references(glue) -> None:
    """The integration's kernels replaced by the float64 references (CPU float32 tensors), as its CPU tests do."""
    import cukiln

    def decode(q, k_cache, v_cache, kv_lens, *, kv_start=None, scale=None, softcap=None, **scales):
        k, v = (c if c.dtype == torch.float8_e4m3fn else c.double() for c in (k_cache, v_cache))
        return cukiln.reference.decode_attention(q.double(), k, v, kv_lens, kv_start=kv_start, scale=scale,
                                                 softcap=softcap, **scales).to(q.dtype)

    glue.HALVES = (torch.float16, torch.bfloat16, torch.float32)
    glue.DEVICE_TYPES = ("cuda", "cpu")
    glue.decode_attention = decode
    glue.rope_qk = lambda q, k, **kwargs: cukiln.reference.rope_qk(q, k, **kwargs)


def noisy_cache(model, max_cache_len: int, seed: int):
    """A static cache whose buffers hold each key and value times 1 + e, e uniform in [-ROUNDING, ROUNDING] per
    element: a rounding as coarse as e4m3's at its worst, with no bias."""
    import transformers
    from transformers.cache_utils import StaticLayer

    gen = torch.Generator(device=model.device).manual_seed(seed)

    class Layer(StaticLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            k, v = (x * (1 + (2 * torch.rand(x.shape, generator=gen, device=x.device) - 1) * ROUNDING).to(x.dtype)
                    for x in (key_states, value_states))
            return super().update(k, v, *args, **kwargs)

    cache = transformers.StaticCache(config=model.config, max_cache_len=max_cache_len)
    cache.layers = [Layer(max_cache_len) for _ in cache.layers]
    return cache


def half_quantized_cache(model, max_cache_len: int, which: str):
    """A static cache whose buffers hold the keys (``which`` "k") or the values ("v") as an FP8 cache dequantizes
    them, the others as they are: which of the two roundings the FP8 cache's error comes from. "v centred": the values
    less each channel's mean over the prompt rounded (the mean kept aside, added back): what storing V's offsets apart
    would buy."""
    import transformers
    from transformers.cache_utils import StaticLayer

    from cukiln import kv_scales
    from cukiln.integrations.transformers import quantized

    class Layer(StaticLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            centred = which == "v centred"
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.offset = value_states.float().mean(dim=2, keepdim=True) if centred else 0.0
                self.scales = [kv_scales(x, head_axis=1) for x in (key_states, value_states - self.offset)]
            states = [key_states, value_states]
            i = "kv".index(which[0])
            scale = self.scales[i]
            x = states[i].float() - (self.offset if i == 1 else 0.0)
            states[i] = (quantized(x, scale).float() * scale.view(1, -1, 1, 1) + (self.offset if i == 1 else 0.0)
                         ).to(states[i].dtype)
            return super().update(*states, *args, **kwargs)

    cache = transformers.StaticCache(config=model.config, max_cache_len=max_cache_len)
    cache.layers = [Layer(max_cache_len) for _ in cache.layers]
    return cache


def teacher_forced(model, tokens: torch.Tensor, prompt: int, cache) -> torch.Tensor:
    """The logits [steps, vocab] of each decode step after a prefill of ``prompt`` tokens, each step fed the next
    token of ``tokens`` (not the model's own choice)."""
    from cukiln.integrations.transformers import cache_argument

    logits = []
    with torch.no_grad():
        model(input_ids=tokens[:, :prompt], use_cache=True, **cache_argument(cache))
        for t in range(prompt, tokens.shape[1]):
            out = model(input_ids=tokens[:, t:t + 1], use_cache=True, cache_position=torch.tensor([t], device=tokens.device),
                        **cache_argument(cache))
            logits.append(out.logits[0, -1].float())
    return torch.stack(logits)


def channel_offsets(model, tokens: torch.Tensor, prompt: int) -> dict:
    """Per layer, over every head and channel of its 16-bit cache after the prompt: the largest and the median
    |mean over tokens| / (standard deviation over tokens), for the keys and for the values — how far a channel's
    values sit from zero beside their spread (rounding errors of values near a common offset agree)."""
    import transformers

    from cukiln.integrations.transformers import cache_argument

    cache = transformers.StaticCache(config=model.config, max_cache_len=prompt)
    with torch.no_grad():
        model(input_ids=tokens[:, :prompt], use_cache=True, **cache_argument(cache))
    found = {}
    for i, layer in enumerate(cache.layers):
        for name, x in (("keys", layer.keys), ("values", layer.values)):
            x = x[0].float()  # [h, T, d]
            ratio = (x.mean(dim=1).abs() / x.std(dim=1)).flatten()
            found[f"layer {i} {name}"] = {"max": ratio.max().item(), "median": ratio.median().item()}
    return found


def compare(model, glue, tokens: torch.Tensor, prompt: int) -> dict:
    """Per step: the largest logit difference to the 16-bit cache's, in units of that step's logits' standard
    deviation, for the FP8 cache and for each noise draw."""
    import transformers

    length = tokens.shape[1]
    base = teacher_forced(model, tokens, prompt, transformers.StaticCache(config=model.config, max_cache_len=length))
    spread = base.std(dim=1)

    def error(logits):
        return ((logits - base).abs().amax(dim=1) / spread).tolist()

    fp8 = error(teacher_forced(model, tokens, prompt, glue.Fp8StaticCache(model.config, max_cache_len=length)))
    alone = {which: error(teacher_forced(model, tokens, prompt, half_quantized_cache(model, length, which)))
             for which in ("k", "v", "v centred")}
    noise = [error(teacher_forced(model, tokens, prompt, noisy_cache(model, length, seed)))
             for seed in range(NOISE_DRAWS)]
    flat = [e for draw in noise for e in draw]
    return {"prompt": prompt, "steps": len(fp8), "fp8_max_logit_error": fp8, "noise_max_logit_error": noise,
            "fp8_mean": sum(fp8) / len(fp8), "fp8_worst": max(fp8), "noise_mean": sum(flat) / len(flat),
            "noise_worst": max(flat),
            # the keys alone rounded as FP8, the values alone: which rounding the error comes from
            **{f"{which.replace(' ', '_')}_only_max_logit_error": errors for which, errors in alone.items()},
            **{f"{which.replace(' ', '_')}_only_mean": sum(errors) / len(errors) for which, errors in alone.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--long", type=int, default=None, help="the long prompt (default 32768 on a GPU, 4096 on the "
                                                                "CPU, where the prefill's attention is slow)")
    parser.add_argument("--out", metavar="JSON")
    args = parser.parse_args()
    from cukiln.integrations import transformers as glue

    if args.device == "cpu":
        use_references(glue)
    model = build(args.device)
    glue.apply(model)
    long = args.long or (32768 if args.device == "cuda" else 4096)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(3, model.config.vocab_size, (1, long + STEPS), generator=gen).to(args.device)
    runs = []
    for prompt in (64, long):
        run = compare(model, glue, tokens[:, :prompt + STEPS], prompt)
        runs.append(run)
        print(f"positions {prompt}-{prompt + STEPS}: FP8 cache logit error {run['fp8_mean']:.4f} mean, "
              f"{run['fp8_worst']:.4f} worst; e4m3-sized noise {run['noise_mean']:.4f} mean, {run['noise_worst']:.4f} "
              f"worst (max |logit - 16-bit cache's| / std of the logits, per step); keys alone rounded "
              f"{run['k_only_mean']:.4f}, values alone {run['v_only_mean']:.4f}, values less their channel means "
              f"{run['v_centred_only_mean']:.4f}")
    result = {"benchmark": "fp8_cache_accuracy", "device": args.device,
              "kernels": "cukiln's" if args.device == "cuda" else "the float64 references",
              "command": "python benchmarks/fp8_cache_accuracy.py --device " + args.device
                         + (f" --long {args.long}" if args.long else ""),
              "model": "Llama-style, 4 layers, hidden 256, 8 query / 2 KV heads of 64, random weights, q and k x 4",
              "rounding": ROUNDING, "runs": runs,
              "channel_offsets_long_prompt": channel_offsets(model, tokens, long),
              "long_over_short": runs[1]["fp8_mean"] / runs[0]["fp8_mean"] if runs[0]["fp8_mean"] else math.nan}
    print(f"long positions' mean error / short positions': {result['long_over_short']:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
