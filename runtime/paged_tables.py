"""Paged caches' tables on the host side: cukiln.block_table, a block table and lengths (what decode_attention,
kv_append and decode_step take with ``block_table=``) from FlashInfer's CSR description of the pages in use
(``kv_indptr``, ``kv_indices``, ``kv_last_page_len``). Torch operations on the tables' device, no kernel of cukiln's:
convert once per batch composition, not per layer."""

from __future__ import annotations


def block_table(kv_indptr, kv_indices, kv_last_page_len, page_size: int, max_pages: int | None = None):
    """(block_table int32 [b, max_pages], kv_lens int32 [b]) of the rows FlashInfer's CSR form describes: row i's
    pages ``kv_indices[kv_indptr[i]:kv_indptr[i + 1]]`` in order, ``kv_last_page_len[i]`` keys on its last (a row
    without pages has 0 keys). Columns past a row's pages hold its first page (a valid index; no key reads them).
    ``max_pages``: the table's width, at least the most pages a row has (None: that most, read back from the device,
    which a CUDA graph cannot capture). A width given is not checked (that would read the rows back: a sync per call):
    a row with more pages keeps its length, past the table's max_pages x page_size keys, so that the ops report it
    (decode: NaN; the append: nothing stored, a NaN query)."""
    import torch

    indptr, indices, last = (torch.as_tensor(t) for t in (kv_indptr, kv_indices, kv_last_page_len))
    if indptr.ndim != 1 or indptr.numel() < 1 or indptr.is_floating_point():
        raise ValueError(f"kv_indptr: expected an integer tensor [b + 1], got {indptr.dtype} {list(indptr.shape)}")
    b = indptr.numel() - 1
    if last.shape != (b,) or last.is_floating_point():
        raise ValueError(f"kv_last_page_len: expected an integer tensor [{b}] (kv_indptr's rows), got {last.dtype} "
                         f"{list(last.shape)}")
    if indices.ndim != 1 or indices.is_floating_point():
        raise ValueError(f"kv_indices: expected an integer tensor [pages in use], got {indices.dtype} "
                         f"{list(indices.shape)}")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1 or page_size & (page_size - 1):
        raise ValueError(f"page_size: expected a power of two, got {page_size!r}")
    indptr, last = indptr.to(indices.device, torch.int64), last.to(indices.device, torch.int64)
    counts = indptr[1:] - indptr[:-1]
    if max_pages is not None and (isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages < 0):
        raise ValueError(f"max_pages: expected a non-negative int or None, got {max_pages!r}")
    width = int(counts.max()) if max_pages is None and b else (max_pages or 0)
    columns = torch.arange(width, device=indices.device)
    used = columns < counts[:, None]
    at = (indptr[:-1, None] + torch.where(used, columns, 0)).clamp(max=max(indices.numel() - 1, 0))
    table = indices[at].to(torch.int32) if indices.numel() else torch.zeros(b, width, dtype=torch.int32,
                                                                           device=indices.device)
    table = torch.where(used | (counts[:, None] == 0), table, table[:, :1])
    lens = torch.where(counts > 0, (counts - 1) * page_size + last, 0).to(torch.int32)
    return table.contiguous(), lens
