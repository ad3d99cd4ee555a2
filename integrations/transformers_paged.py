"""cukiln inside transformers' continuous batching (``model.generate_batch`` and its paged cache): the attention
implementation "paged|cukiln", which continuous batching switches a model on "cukiln" (``apply(model)``) to by itself.

Continuous batching packs every request's new tokens into one row and keeps the keys and values in a token-granular
pool per layer group, ``[slots, h_kv, d]``, addressed by flat slot indices: for each step a write index (the new tokens'
slots) and a read index (every request's slots, request after request). A decode batch (one new token a request) of a
full-attention layer is served here: the new keys and values stored at their slots (as transformers stores them), then
cukiln's paged decode over the pool seen as pages of one slot, through a block table made from the read index
(cukiln.block_table: the read index is FlashInfer's CSR form of pages of size 1), on the device, without the gather of
every request's keys that transformers' own paged attention makes. Prefill and mixed batches, and sliding-window
layers, take transformers' own paged attention (SDPA, or its eager attention for attention sinks) with the block-diagonal
mask transformers builds for it. Served: transformers whose paged cache hands the attention the cache and its read
and write indices (5.17's form); a model with a logit softcap is refused.
"""

from __future__ import annotations

import torch

_GLUE: list = [None]  # the integration whose kernels and checks this serves with (cukiln.integrations.transformers)


def register(attention_name: str, glue) -> None:
    """"paged|<attention_name>" in transformers' attention registry (idempotent), served with ``glue``'s kernels
    (its decode_attention, and the types and devices it takes: the CPU tests put the float64 references there)."""
    from transformers import AttentionInterface

    _GLUE[0] = glue
    AttentionInterface.register(f"paged|{attention_name}", paged_attention)


def paged_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask, dropout=0.0,
                    scaling=None, **kwargs):
    """transformers' paged attention function: query [1, h_q, tokens, d], key and value [1, h_kv, tokens, d] (the
    step's new tokens, every request's packed); returns ([1, tokens, h_q, d], None)."""
    glue = _GLUE[0]
    cache = kwargs.get("cache")
    if cache is None or "read_index" not in kwargs or "write_index" not in kwargs:
        raise ValueError("paged|cukiln: continuous batching handed no paged cache with read and write indices; this "
                         "transformers' continuous batching is not the form cukiln serves (transformers 5.17's)")
    if kwargs.get("softcap") is not None or glue._softcap(module.config) is not None:
        raise ValueError("paged|cukiln: continuous batching through cukiln serves models without a logit softcap")
    layer = module.layer_idx
    group, index_in_group = cache.layer_index_to_group_indices[layer]
    sinks = kwargs.get("s_aux")
    if kwargs.get("max_seqlen_q") == 1 and cache.sliding_windows[layer] == 1 and query.device.type in glue.DEVICE_TYPES \
            and query.dtype in glue.HALVES:
        return _decode(module, query, key, value, cache, group, index_in_group, scaling, sinks, kwargs), None
    return _transformers_paged(module, query, key, value, dropout, scaling, sinks, kwargs)


def _decode(module, query, key, value, cache, group: int, index_in_group: int, scaling, sinks, kwargs):
    """A decode batch: request i's one new token is token i (continuous batching packs the requests in order, the
    padding requests of no token last). Store the new keys and values at their slots, then decode over the pool."""
    from cukiln.paged_tables import block_table

    k_pool, v_pool = cache.key_cache[index_in_group], cache.value_cache[index_in_group]  # [slots, h_kv, d]
    write = kwargs["write_index"][group]
    k_pool.index_copy_(0, write, key[0].transpose(0, 1))
    v_pool.index_copy_(0, write, value[0].transpose(0, 1))
    cu_k = kwargs["cu_seq_lens_k"]
    tokens = query.shape[2]
    rows = min(cu_k.numel() - 1, tokens)
    read = kwargs["read_index"][group]
    table, lens = block_table(cu_k[:rows + 1], read, torch.ones(rows, dtype=torch.int32, device=read.device), 1,
                              max_pages=max(int(kwargs["max_seqlen_k"]), 1))
    extra = {"sinks": _GLUE[0].fp32_sinks(module, sinks)} if sinks is not None else {}
    out = _GLUE[0].decode_attention(query[0, :, :rows].transpose(0, 1), k_pool.unsqueeze(1), v_pool.unsqueeze(1),
                                lens.to(query.device), kv_layout="bshd", block_table=table.to(query.device),
                                scale=scaling, **extra)
    result = query.new_zeros((1, tokens) + out.shape[1:])
    result[0, :rows] = out
    return result


def _transformers_paged(module, query, key, value, dropout, scaling, sinks, kwargs):
    """transformers' own paged attention with the mask it builds for it (block-diagonal over the requests, causal,
    with the layer's sliding window): its eager form where the layer has attention sinks, which its SDPA leaves out."""
    from transformers.generation.continuous_batching.utils import build_attention_mask
    from transformers.integrations.eager_paged import eager_paged_attention_forward
    from transformers.integrations.sdpa_paged import sdpa_attention_paged_forward

    cache = kwargs["cache"]
    cu_q, cu_k = kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"]
    # [1, 1, tokens, keys read back]: transformers' smallest value where a token may not look (padding tokens: every
    # key, as transformers' own mask leaves them)
    mask = torch.full((1, 1, query.shape[2], int(cu_k[-1])), torch.finfo(query.dtype).min, dtype=query.dtype,
                      device=query.device)
    build_attention_mask(mask, cu_q.tolist(), cu_k.tolist(), sliding_window=cache.sliding_windows[module.layer_idx])
    forward = eager_paged_attention_forward if sinks is not None else sdpa_attention_paged_forward
    return forward(module, query, key, value, mask, dropout=dropout, scaling=scaling, **kwargs)
