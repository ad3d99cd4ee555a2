"""cukiln in Hugging Face transformers (v5): ``apply(model)`` and generation runs through cukiln's kernels.

What changes, for every attention layer of the model:

- **Decode** (one new token a row, ``q_len == 1``): the attention is ``cukiln.torch.decode_attention`` over the
  cache's own key and value buffers, read in place (a static cache's ``[b, h_kv, max_cache_len, d]`` buffers, or
  a dynamic cache's tensors): GQA, left padding, the module's ``scaling``, Gemma-2's logit softcap, and
  sliding-window layers (whose cache holds the window's last positions).
- **Prefill** (``q_len > 1``): transformers' own exact path: SDPA, or the model's eager attention where SDPA would
  drop the logit softcap (transformers' SDPA ignores it).
- **RoPE**: the modeling module's ``apply_rotary_pos_emb(q, k, cos, sin)`` rotates q and k with
  ``cukiln.torch.rope_qk`` in place on the (b, s, h, d) storage transformers' views hold, with the cos/sin the model's
  rotary module computed (so every rope recipe and its attention scaling are the model's own). Calls it cannot
  serve exactly as cukiln (gradients, fp32, partial or other table layouts) go to the original function.

How: ``apply`` registers an attention implementation named "cukiln" in transformers' ``AttentionInterface`` and a
mask function under the same name in ``AttentionMaskInterface``, then switches the model to it. For a decode step
the mask function returns the step's lengths instead of a 4-D mask, computed once a step and mask type (not per layer): an int32
tensor [2, b, 1, 1], each row's first valid slot (its left padding) and its key count after the step (4-D, so that
transformers hands it to the layers untouched). Everything in a decode step is a tensor operation or a cukiln torch
op, so transformers' compiled static-cache decoding (torch.compile, CUDA graphs) runs it as it is.

**FP8 caches**: ``Fp8StaticCache(config, max_cache_len)`` in place of transformers' static cache holds the keys and values in
FP8 (e4m3) with a scale per KV head and layer (calibrated on the prompt, ``cukiln.kv_scales``, or given): decode
reads it through cukiln's FP8 decode; prefill dequantizes it for transformers' path.

Served: the attention of the model types in MODEL_TYPES, whose features the tests cover. Refused, naming the
feature: another model type, chunked attention, a head dim cukiln's decode kernels do not take, a model that is not
fp16/bf16 or not on a CUDA device, an attention_mask that is not left padding, a request for attention weights. A
modeling module whose rotary function is not transformers' rotate-half formula on (q, k, cos, sin) keeps its own.
"""

from __future__ import annotations

import inspect
import sys

import torch
from transformers import AttentionInterface
from transformers.cache_utils import StaticCache, StaticLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

import cukiln.torch as ct
from cukiln.decode_plan import HEAD_DIMS, MAX_QUERY_TOKENS
from cukiln.fp8_scales import kv_scales, quantize_e4m3

NAME = "cukiln"
HALVES = (torch.float16, torch.bfloat16)  # the dtypes cukiln's kernels take
DEVICE_TYPES = ("cuda",)  # where they run
# the model types whose attention the integration serves: the ones its tests cover (CPU end to end with the float64
# references, static and dynamic caches, sliding windows, gpt-oss's attention sinks; GPU: llama, qwen2, gemma2)
MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gpt_oss")

# The kernels the glue calls: module attributes, so that the CPU tests can put the float64 references in their place.
decode_attention = ct.decode_attention
rope_qk = ct.rope_qk


def cache_argument(cache) -> dict:
    """``generate()``'s keyword for a cache object: ``cache`` from transformers 5.24 (which deprecates
    ``past_key_values``, with a FutureWarning), ``past_key_values`` before it."""
    import transformers

    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return {"cache" if (major, minor) >= (5, 24) else "past_key_values": cache}


def apply(model):
    """Run ``model``'s attention and RoPE through cukiln (see the module's doc); returns the model. Raises
    ValueError naming what cukiln cannot serve (nothing is changed then)."""
    attention_modules = [m for m in model.modules() if _is_attention(m)]
    if not attention_modules:
        raise ValueError(f"{type(model).__name__}: no transformers attention layer (q_proj, k_proj, v_proj with a "
                         "layer_idx) found to run through cukiln")
    config = attention_modules[0].config
    if config.model_type not in MODEL_TYPES:
        raise ValueError(f"{type(model).__name__}: model type {config.model_type!r}; cukiln's transformers "
                         f"integration serves {', '.join(MODEL_TYPES)} (the attention features its tests cover)")
    if getattr(config, "attention_chunk_size", None) or "chunked_attention" in (getattr(config, "layer_types",
                                                                                          None) or ()):
        raise ValueError(f"{type(model).__name__}: chunked attention; cukiln decodes full and sliding-window "
                         "attention only")
    for m in attention_modules:
        head_dim = m.head_dim
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"{type(m).__name__}: head dim {head_dim}; cukiln's decode kernels take {HEAD_DIMS}")
        if getattr(m.config, "use_bidirectional_attention", False):
            raise ValueError(f"{type(m).__name__}: bidirectional attention; cukiln decodes causal attention only")
    parameter = next(model.parameters())
    if parameter.dtype not in HALVES:
        raise ValueError(f"{type(model).__name__}: parameters in {parameter.dtype}; cukiln's decode kernels take "
                         "float16 or bfloat16 models (load with dtype=torch.bfloat16)")
    if parameter.device.type not in DEVICE_TYPES:
        raise ValueError(f"{type(model).__name__}: parameters on {parameter.device}; cukiln's kernels run on CUDA "
                         "devices (model.to('cuda') first)")
    register()
    for m in attention_modules:  # gpt-oss's sinks in fp32, as the decode takes them: once here, not every step
        if isinstance(getattr(m, "sinks", None), torch.Tensor):
            m.cukiln_sinks = m.sinks.detach().float().contiguous()
    if config._attn_implementation != NAME:
        model._cukiln_previous_attn_implementation = config._attn_implementation
    for module_name in {type(m).__module__ for m in attention_modules}:
        _use_cukiln_rotary(sys.modules[module_name])
    model.set_attn_implementation(NAME)
    return model


def remove(model, attn_implementation: str | None = None):
    """Undo apply: ``model`` back on ``attn_implementation`` (default: the one it had before apply), and the modeling
    modules of its attention layers back on their own rotary function (for every model of those modules). Returns
    the model."""
    model.set_attn_implementation(attn_implementation or getattr(model, "_cukiln_previous_attn_implementation",
                                                                  "sdpa"))
    for m in model.modules():
        if hasattr(m, "cukiln_sinks"):
            del m.cukiln_sinks
    for module_name in {type(m).__module__ for m in model.modules() if _is_attention(m)}:
        modeling = sys.modules[module_name]
        original = getattr(getattr(modeling, "apply_rotary_pos_emb", None), "cukiln_original", None)
        if original is not None:
            modeling.apply_rotary_pos_emb = original
    return model


def register() -> None:
    """The "cukiln" attention implementation and its mask function, in transformers' registries, and "paged|cukiln",
    which continuous batching (``generate_batch``) switches a "cukiln" model to (transformers_paged; idempotent)."""
    from . import transformers_paged

    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, mask)
    transformers_paged.register(NAME, sys.modules[__name__])


def _is_attention(m) -> bool:
    return all(hasattr(m, a) for a in ("q_proj", "k_proj", "v_proj", "layer_idx", "head_dim", "config"))


# --- masks: a decode step's lengths, or transformers' own masks ----------------------------------------------------

def mask(batch_size: int, q_length: int, kv_length: int, q_offset=0, kv_offset: int = 0, mask_function=None,
         attention_mask: torch.Tensor | None = None, config=None, device=None, **kwargs):
    """transformers' mask function for "cukiln": for a decode step (q_length 1), or a step of a few query tokens a row
    (up to MAX_QUERY_TOKENS: assisted generation's verification, a short prompt) in a model without sliding windows,
    the step's lengths (decode_lengths); otherwise the mask of the exact path the attention takes (eager where the
    model caps its logits or has attention sinks, SDPA's else), after checking that a 2-D attention_mask is left
    padding."""
    few = q_length > 1 and serves_query_tokens(config, q_length)
    if q_length != 1 and not few:
        if attention_mask is not None and attention_mask.ndim == 2 and not torch.compiler.is_compiling():
            check_left_padding(attention_mask)
        build = eager_mask if _eager_prefill(config) else sdpa_mask
        kwargs.update(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                      kv_offset=kv_offset, attention_mask=attention_mask, config=config, device=device)
        if mask_function is not None:
            kwargs["mask_function"] = mask_function
        return build(**kwargs)
    if few and attention_mask is not None and attention_mask.ndim == 2 and not torch.compiler.is_compiling():
        check_left_padding(attention_mask)
    return decode_lengths(batch_size, q_offset, attention_mask, device, q_length)




def serves_query_tokens(config, q_length: int) -> bool:
    """Whether a step of ``q_length`` query tokens a row goes through cukiln's decode: up to MAX_QUERY_TOKENS, in a
    model without sliding windows (each token's window would start elsewhere)."""
    return q_length <= MAX_QUERY_TOKENS and getattr(config, "sliding_window", None) is None


def decode_lengths(batch_size: int, q_offset, attention_mask: torch.Tensor | None, device,
                   q_length: int = 1) -> torch.Tensor:
    """A decode step's lengths as an int32 tensor [2, b, 1, 1]: [0] each row's first valid position (its left
    padding: the first True of the 2-D attention_mask), [1] the keys each row holds after the step (the cache's
    length before it, ``q_offset``, plus the step's ``q_length`` new tokens). Tensor operations only
    (graph-capturable)."""
    if attention_mask is not None:
        start = attention_mask.to(torch.int32).argmax(-1).to(torch.int32)
    else:
        start = torch.zeros(batch_size, dtype=torch.int32, device=device)
    total = torch.as_tensor(q_offset, device=start.device).to(torch.int32) + q_length
    return torch.stack((start, total.expand(batch_size)))[:, :, None, None]


def is_decode_lengths(attention_mask, batch: int | None = None) -> bool:
    """Whether ``attention_mask`` is decode_lengths' [2, b, 1, 1] int32 tensor (of ``batch`` rows when given)."""
    return (isinstance(attention_mask, torch.Tensor) and attention_mask.dtype == torch.int32
            and attention_mask.ndim == 4 and attention_mask.shape[0] == 2 and attention_mask.shape[2:] == (1, 1)
            and (batch is None or attention_mask.shape[1] == batch))


def check_left_padding(attention_mask: torch.Tensor) -> None:
    """ValueError unless every row of the 2-D mask is padding then tokens (zeros, then ones): the decode kernel
    attends to one range of slots a row. Reads the mask on the host (a prefill's, once a generation)."""
    m = attention_mask.to(torch.int8)
    if bool((m[:, 1:] < m[:, :-1]).any()):
        raise ValueError("attention_mask: cukiln decodes left-padded batches (each row: padding, then its tokens); "
                         "this mask has padding after a token (right padding or holes): pad on the left "
                         "(tokenizer.padding_side = 'left')")


# --- FP8 caches ------------------------------------------------------------------------------------------------------

FP8 = torch.float8_e4m3fn


class Fp8StaticLayer(StaticLayer):
    """A static cache layer holding keys and values in FP8 (e4m3), ``[b, h_kv, max_cache_len, d]``, each stored as
    value / its KV head's scale rounded with saturation (as cukiln.kv_append stores them). The scales (fp32 [h_kv],
    carried by the buffers as their ``cukiln_scale``, where the attention finds them) are ``k_scale`` / ``v_scale``
    when given, else calibrated on the first update (the prompt's keys and values: amax / 448 per KV head)."""

    def __init__(self, max_cache_len: int, k_scale=None, v_scale=None, **kwargs):
        super().__init__(max_cache_len, **kwargs)
        self.given_scales = (k_scale, v_scale)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.keys, self.values = (torch.zeros_like(t, dtype=FP8) for t in (self.keys, self.values))
        for buffer, given, states in zip((self.keys, self.values), self.given_scales, (key_states, value_states)):
            scale = kv_scales(states, head_axis=1) if given is None else torch.as_tensor(given)
            buffer.cukiln_scale = scale.to(torch.float32).to(self.device).expand(self.num_heads).contiguous()
        if not torch.compiler.is_compiling():
            torch._dynamo.mark_static_address(self.keys)
            torch._dynamo.mark_static_address(self.values)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        return super().update(quantized(key_states, self.keys.cukiln_scale),
                              quantized(value_states, self.values.cukiln_scale), *args, **kwargs)


class Fp8StaticCache(StaticCache):
    """transformers' static cache with every layer an Fp8StaticLayer (full attention; sliding-window layers are not
    served in FP8). ``k_scale`` / ``v_scale``: each layer's scales (a float, or fp32 [h_kv]), else calibrated on the
    prompt."""

    def __init__(self, config, max_cache_len: int, k_scale=None, v_scale=None, **kwargs):
        super().__init__(config=config, max_cache_len=max_cache_len, **kwargs)
        if any(layer.is_sliding for layer in self.layers):
            raise ValueError("Fp8StaticCache: the model has sliding-window layers; FP8 caches serve full attention")
        self.layers = [Fp8StaticLayer(max_cache_len, k_scale, v_scale) for _ in self.layers]


def quantized(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x`` [b, h_kv, s, d] as an FP8 cache holds it, ``scale`` one per KV head (quantize_e4m3)."""
    return quantize_e4m3(x, scale.view(1, -1, 1, 1))


def dequantized(cache: torch.Tensor, dtype) -> torch.Tensor:
    """An FP8 cache buffer as ``dtype`` values (prefill's attention takes them)."""
    return (cache.to(torch.float32) * cache.cukiln_scale.view(1, -1, 1, 1)).to(dtype)


def fp32_sinks(module, sinks: torch.Tensor) -> torch.Tensor:
    """A layer's attention sinks as the decode takes them (fp32, contiguous): the copy apply made, or (sinks changed
    shape since, or a layer apply did not see) a conversion now."""
    made = getattr(module, "cukiln_sinks", None)
    return made if made is not None and made.shape == sinks.shape else sinks.detach().float().contiguous()


def _softcap(config):
    return getattr(config, "attn_logit_softcapping", None)


# the model types whose attention layers have sinks (gpt-oss's s_aux), which transformers' SDPA does not take
SINK_MODEL_TYPES = ("gpt_oss",)


def _eager_prefill(config) -> bool:
    """Whether a prefill of this model takes its eager attention (a logit softcap or attention sinks: what
    transformers' SDPA path leaves out), and so the eager mask."""
    return _softcap(config) is not None or getattr(config, "model_type", None) in SINK_MODEL_TYPES


# --- attention --------------------------------------------------------------------------------------------------

def attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask, dropout=0.0,
              scaling=None, softcap=None, sliding_window=None, **kwargs):
    """transformers' attention function for "cukiln": query [b, h_q, s, d], key and value the cache's
    [b, h_kv, T, d] (after this step's update); returns ([b, s, h_q, d], None). ``sliding_window``: the layer's
    window (the module's attribute, or the argument some models pass instead)."""
    if kwargs.get("output_attentions"):
        raise ValueError("output_attentions: cukiln returns no attention weights; use attn_implementation='eager' "
                         "to get them")
    scales = {"k_scale": key.cukiln_scale, "v_scale": value.cukiln_scale} if key.dtype == FP8 else {}
    sinks = kwargs.get("s_aux")  # gpt-oss's attention sinks, a logit per query head
    if is_decode_lengths(attention_mask, query.shape[0]):
        window = getattr(module, "sliding_window", None) or sliding_window
        if query.shape[2] != 1 and window is not None:
            raise ValueError(f"query: decode lengths came with {query.shape[2]} query tokens a row in a layer of a "
                             f"sliding window, whose tokens' windows differ (the mask function gives such layers "
                             f"transformers' mask)")
        if sinks is not None:
            scales["sinks"] = fp32_sinks(module, sinks)
        return _decode(query, key, value, attention_mask, scaling, softcap, window, scales), None
    if scales:  # an FP8 cache's prefill: transformers' path on its values
        key, value = dequantized(key, query.dtype), dequantized(value, query.dtype)
    # prefill: transformers' exact path (its SDPA ignores a logit softcap and attention sinks: the model's eager
    # attention then)
    kwargs["sliding_window"] = sliding_window
    if softcap is not None or sinks is not None:
        eager = sys.modules[type(module).__module__].eager_attention_forward
        return eager(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, softcap=softcap,
                     **kwargs)
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                  **kwargs)


def _decode(query, key, value, lengths, scaling, softcap, window, scales):
    start, lens = lengths[0, :, 0, 0], lengths[1, :, 0, 0]
    if window is not None:
        # the new token attends to the window's last positions, [lens - window, lens); the cache holds its last
        # key.shape[2] positions in order (all of them for a cache that does not evict): slot 0 is position
        # max(lens - T, 0)
        start = torch.maximum(start, lens - window)
        dropped = (lens - key.shape[2]).clamp(min=0)
        start, lens = (start - dropped).clamp(min=0), lens - dropped
    if query.shape[2] > 1:  # a few query tokens a row: [b, n, h_q, d], token j attending up to itself
        tokens = query.transpose(1, 2)
        if tokens.shape[0] > 1 and tokens.stride(0) != tokens.shape[1] * tokens.stride(1):
            tokens = tokens.contiguous()  # (a rotation that made a [b, h, n, d] tensor of its own: rows and tokens
            #                                mergeable, as the kernels take them; a few tokens' copy)
        return decode_attention(tokens, key, value, lens, kv_start=start, scale=scaling, softcap=softcap, **scales)
    out = decode_attention(query[:, :, 0], key, value, lens, kv_start=start, scale=scaling, softcap=softcap, **scales)
    return out.unsqueeze(1)


# --- RoPE ---------------------------------------------------------------------------------------------------------

def _use_cukiln_rotary(modeling) -> None:
    """Replace the modeling module's apply_rotary_pos_emb (what its attention layers call) by cukiln's, once, if it
    is transformers' rotate-half formula on (q, k, cos, sin) (rotates_half)."""
    original = getattr(modeling, "apply_rotary_pos_emb", None)
    if original is None or getattr(original, "cukiln_original", None) is not None or not rotates_half(original):
        return

    def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
        if args or kwargs.get("unsqueeze_dim", 1) != 1 or not _rotates_exactly(q, k, cos, sin):
            return original(q, k, cos, sin, *args, **kwargs)
        return rotate(q, k, cos, sin)

    apply_rotary_pos_emb.cukiln_original = original
    apply_rotary_pos_emb.__doc__ = f"cukiln's rope_qk in place of {original.__module__}.apply_rotary_pos_emb."
    modeling.apply_rotary_pos_emb = apply_rotary_pos_emb


def rotates_half(fn) -> bool:
    """Whether ``fn(q, k, cos, sin)`` computes q * cos + rotate_half(q) * sin (and the same of k), rotate_half(x)
    being (-x2, x1) of x's halves: tried once on small random float64 inputs (another signature, pairing or table
    layout answers no)."""
    # transformers 5.25 on hands a modeling module's rotary function to its hub kernels as an nn.Module whose forward is
    # the function: its signature is the forward's
    names = list(inspect.signature(fn.forward if isinstance(fn, torch.nn.Module) else fn).parameters)[:4]
    if names[:2] != ["q", "k"] or len(names) < 4:
        return False
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 5, 8, generator=gen, dtype=torch.float64), torch.randn(2, 1, 5, 8, generator=gen,
                                                                                       dtype=torch.float64)
    cos, sin = torch.randn(2, 5, 8, generator=gen, dtype=torch.float64), torch.randn(2, 5, 8, generator=gen,
                                                                                       dtype=torch.float64)

    def formula(x):
        half = torch.cat((-x[..., 4:], x[..., :4]), -1)
        return x * cos[:, None] + half * sin[:, None]

    try:
        got = fn(q, k, cos, sin)
    except Exception:  # noqa: BLE001 - any failure means another contract
        return False
    return (isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)
            and torch.allclose(got[0], formula(q)) and torch.allclose(got[1], formula(k)))


def _rotates_exactly(q, k, cos, sin) -> bool:
    """Whether cukiln computes what transformers' rotate-half formula does for these arguments: fp16/bf16 q and k
    of one head dim, cos and sin [b or 1, s, d] full width, nothing that needs a gradient."""
    if q.dtype not in HALVES or k.dtype != q.dtype or q.ndim != 4 or k.ndim != 4 or q.device.type not in DEVICE_TYPES:
        return False
    if cos.ndim != 3 or cos.shape != sin.shape or cos.shape[-1] != q.shape[-1] or k.shape[-1] != q.shape[-1]:
        return False
    if cos.shape[1] != q.shape[2] or cos.shape[0] not in (1, q.shape[0]):
        return False
    return not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad))


def rotate(q, k, cos, sin):
    """q [b, h_q, s, d] and k [b, h_kv, s, d] (views of (b, s, h, d) projections) rotated in place by cukiln with
    the per-token cos and sin [b or 1, s, d] (full width): each token (i, j) reads row i * s + j (j for a shared
    row), as a table of positions."""
    b, _, s, d = q.shape
    rows = cos.shape[0]
    cos_table, sin_table = cos.reshape(rows * s, d), sin.reshape(rows * s, d)
    positions = _positions(b, s, rows == 1, q.device)
    q_rot, k_rot = rope_qk(q.transpose(1, 2), k.transpose(1, 2), cos=cos_table, sin=sin_table, positions=positions,
                           layout="bshd", inplace=True)
    return q_rot.transpose(1, 2), k_rot.transpose(1, 2)


_POSITIONS: dict = {}


def _positions(b: int, s: int, shared: bool, device) -> torch.Tensor:
    """Table rows [b, s]: i * s + j, or j for a table shared by the batch (made once per shape in eager mode)."""
    key = (b, s, shared, device)
    cached = None if torch.compiler.is_compiling() else _POSITIONS.get(key)
    if cached is not None:
        return cached
    if shared:
        positions = torch.arange(s, device=device).expand(b, s)
    else:
        positions = torch.arange(b * s, device=device).view(b, s)
    if not torch.compiler.is_compiling():
        if len(_POSITIONS) > 256:
            _POSITIONS.clear()
        _POSITIONS[key] = positions
    return positions
