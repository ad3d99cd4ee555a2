"""FlashInfer's decode on a copy of cukiln's caches, for the benchmarks that time it beside cukiln (where FlashInfer
imports: a ModuleNotFoundError otherwise, which the benchmarks record as the reason its columns are empty).

FlashInfer's batch decode reads a paged cache and splits a row's keys only in whole pages: it gets a page-16 NHD copy
(page 16, as serving engines use; K pages and V pages apart), row i on pages [i * pages, (i + 1) * pages).
"""

from __future__ import annotations

PAGE = 16
WORKSPACE_BYTES = 128 * 2**20


def paged_copy(k_cache, v_cache) -> tuple:
    """(k_pages, v_pages [b * pages, PAGE, h_kv, d], page table [b, pages]) of bhsd caches [b, h_kv, T, d] (any
    strides with a contiguous head dim; T whole pages): the decode checks' paged copy (tools/decode/checks.py), NHD,
    row i on pages [i * pages, (i + 1) * pages), no spare page."""
    from .decode.checks import paged_copy as copy

    if k_cache.shape[2] % PAGE:
        raise ValueError(f"FlashInfer's copy takes whole pages of {PAGE}: the caches hold {k_cache.shape[2]} positions")
    (k_pages, v_pages), table = copy((k_cache, v_cache), PAGE, pool_layout="bshd", spare=0, shuffled=False)
    return k_pages, v_pages, table


def pages_in_use(table, keys: int, page: int = PAGE) -> dict:
    """FlashInfer's description of ``keys`` keys in every row of ``table``'s pages of ``page`` keys: "indptr" [b + 1],
    "indices" (the pages used, row by row) and "last" (keys on each row's last page), int32."""
    import torch

    b = table.shape[0]
    used = -(-keys // page)
    return {"indptr": torch.arange(b + 1, device=table.device, dtype=torch.int32) * used,
            "indices": table[:, :used].flatten().contiguous(),
            "last": torch.full((b,), keys - (used - 1) * page, device=table.device, dtype=torch.int32)}


def batch_decode(table, keys: int, heads_q: int, heads_kv: int, head_dim: int, dtype, *, tensor_cores: bool = False,
                 kv_dtype=None, page: int = PAGE, queries: int = 1):
    """A BatchDecodeWithPagedKVCacheWrapper planned for ``keys`` keys in every row of ``table``'s pages of ``page``
    keys (NHD; CUDA-core decode, or with ``tensor_cores`` its tensor-core path, which runs FlashInfer's prefill
    kernels) of q in ``dtype`` over pages of ``kv_dtype`` (default: ``dtype``; an FP8 one: its scales go to run);
    ``queries`` > 1 (tensor cores): that many query tokens a row, causal among the row's last keys (its
    ``q_len_per_req``); call ``wrapper.run(q [b * queries, h_q, d], (k_pages, v_pages))``."""
    import flashinfer.decode
    import torch

    pages = pages_in_use(table, keys, page)
    wrapper = flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper(
        torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=table.device), "NHD", use_tensor_cores=tensor_cores)
    per_request = {"q_len_per_req": queries} if queries > 1 else {}
    wrapper.plan(pages["indptr"], pages["indices"], pages["last"], heads_q, heads_kv, head_dim, page,
                 pos_encoding_mode="NONE", q_data_type=dtype, kv_data_type=kv_dtype or dtype, **per_request)
    return wrapper


def batch_prefill(table, keys: int, queries: int, heads_q: int, heads_kv: int, head_dim: int, dtype, *,
                  page: int = PAGE):
    """A BatchPrefillWithPagedKVCacheWrapper (its FA2 kernels) planned for ``queries`` query tokens a row, causal,
    over ``keys`` keys in every row of ``table``'s pages of ``page`` keys (NHD; the new tokens the last ``queries``
    of them: token j attends to keys [0, keys - queries + j + 1)); call ``wrapper.run(q [b * queries, h_q, d],
    (k_pages, v_pages))``."""
    import flashinfer.prefill
    import torch

    pages = pages_in_use(table, keys, page)
    b = table.shape[0]
    wrapper = flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper(
        torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=table.device), "NHD", backend="fa2")
    wrapper.plan(torch.arange(b + 1, device=table.device, dtype=torch.int32) * queries, pages["indptr"],
                 pages["indices"], pages["last"], heads_q, heads_kv, head_dim, page, causal=True,
                 q_data_type=dtype, kv_data_type=dtype)
    return wrapper


def single_decode(q_row, k_row, v_row):
    """FlashInfer's single-request decode of q [h_q, d] over contiguous HND copies of one row's K and V [h_kv, T,
    d] (made here: its kernel takes no strides)."""
    import flashinfer.decode

    k, v = k_row.contiguous().clone(), v_row.contiguous().clone()
    return lambda: flashinfer.decode.single_decode_with_kv_cache(q_row, k, v, kv_layout="HND")
