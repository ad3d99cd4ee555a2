"""Context parallel sharding: which tokens of a global batch each rank holds, and putting them back.

cukiln.rope's ``cp_size``/``cp_rank`` follow TransformerEngine's load-balanced split: every sequence is
cut into 2 * cp_size equal chunks and rank r holds chunks r and 2 * cp_size - 1 - r, in that order
(the first rank gets the first and the last chunk, so causal attention costs every rank the same).
These helpers do that split on a global tensor and undo it on the gathered shards:

    local = shard(x, cp_size, rank, cu_seqlens=cu)          # thd: x [tokens, h, d], cu global offsets
    y_local = cukiln.rope(local, freqs=f, layout="thd", cu_seqlens=cu, cp_size=cp_size, cp_rank=rank)
    torch.distributed.all_gather(parts, y_local)            # every shard has tokens / cp_size rows
    y = reassemble(parts, cu_seqlens=cu)                    # equals cukiln.rope(x, ...) on one GPU

Dense layouts shard the sequence dimension (``seq_dim``: 0 for sbhd, 1 for bshd), which is one sequence
per batch row. They are host-side helpers for examples, tests and data loaders: with cu_seqlens on a GPU
they read its values back (one synchronization), so keep them off the per-step path.
"""

from __future__ import annotations


def _lengths(cu_seqlens, total: int | None) -> list[int]:
    if cu_seqlens is None:
        return [total]
    values = [int(v) for v in (cu_seqlens.tolist() if hasattr(cu_seqlens, "tolist") else cu_seqlens)]
    if not values or values[0] != 0 or any(b < a for a, b in zip(values, values[1:])):
        raise ValueError(f"cu_seqlens: expected non-decreasing offsets starting at 0, got {values[:8]}")
    return [b - a for a, b in zip(values, values[1:])]


def _check(cp_size: int, cp_rank: int | None = None) -> None:
    if isinstance(cp_size, bool) or not isinstance(cp_size, int) or cp_size < 1:
        raise ValueError(f"cp_size: expected a positive int, got {cp_size!r}")
    if cp_rank is not None and (isinstance(cp_rank, bool) or not isinstance(cp_rank, int)
                                or not 0 <= cp_rank < cp_size):
        raise ValueError(f"cp_rank: expected an int in [0, cp_size={cp_size}), got {cp_rank!r}")


def shard_index(lengths: list[int], cp_size: int, cp_rank: int) -> list[int]:
    """Global indices (along the sharded dimension) of the tokens rank ``cp_rank`` holds, in its order.

    ``lengths``: the global sequence lengths, back to back; each must be divisible by 2 * cp_size.
    """
    _check(cp_size, cp_rank)
    out, start = [], 0
    for i, n in enumerate(lengths):
        if n % (2 * cp_size):
            raise ValueError(f"sequence {i}: length {n} is not divisible by 2 * cp_size = {2 * cp_size}")
        chunk = n // (2 * cp_size)
        for c in (cp_rank, 2 * cp_size - 1 - cp_rank):
            out.extend(range(start + c * chunk, start + (c + 1) * chunk))
        start += n
    return out


def shard(x, cp_size: int, cp_rank: int, *, cu_seqlens=None, seq_dim: int = 0):
    """The part of the global tensor ``x`` that rank ``cp_rank`` holds (a new tensor).

    thd: give ``cu_seqlens`` (the global offsets) and the tokens are dimension 0; dense layouts: the
    sequence dimension is ``seq_dim`` (0 for sbhd, 1 for bshd).
    """
    import torch

    dim = 0 if cu_seqlens is not None else seq_dim
    index = shard_index(_lengths(cu_seqlens, x.shape[dim]), cp_size, cp_rank)
    if cu_seqlens is not None and len(index) * cp_size != x.shape[0]:
        raise ValueError(f"x: cu_seqlens covers {len(index) * cp_size} tokens, x has {x.shape[0]}")
    return x.index_select(dim, torch.tensor(index, dtype=torch.int64, device=x.device))


def reassemble(shards, *, cu_seqlens=None, seq_dim: int = 0):
    """The global tensor from every rank's shard (``shards[r]`` from rank r, as all_gather returns them)."""
    import torch

    cp_size = len(shards)
    _check(cp_size)
    dim = 0 if cu_seqlens is not None else seq_dim
    if any(s.shape != shards[0].shape for s in shards):
        raise ValueError(f"shards: expected equal shapes, got {[list(s.shape) for s in shards]}")
    total = shards[0].shape[dim] * cp_size
    lengths = _lengths(cu_seqlens, total)
    if sum(lengths) != total:
        raise ValueError(f"shards: hold {total} tokens, cu_seqlens covers {sum(lengths)}")
    index = [i for r in range(cp_size) for i in shard_index(lengths, cp_size, r)]
    gathered = torch.cat(list(shards), dim=dim)
    out = torch.empty_like(gathered)
    out.index_copy_(dim, torch.tensor(index, dtype=torch.int64, device=gathered.device), gathered)
    return out
