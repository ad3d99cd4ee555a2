"""Context parallel: RoPE's sharding of a global batch (which tokens each rank holds, and putting them back), and
decode attention over a KV cache sharded across ranks (DecodeContextParallel, below).

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


# --- decode context parallel: each rank holds stripes of every row's cache ------------------------------------------
#
# A row's cache positions are dealt out in stripes of STRIPE keys, round-robin: global position p lives on rank
# (p // STRIPE) % world, at local slot (p // (STRIPE * world)) * STRIPE + p % STRIPE of that rank's fixed-capacity cache,
# so each rank's cache holds its positions in order, contiguous, and every rank holds as many keys as another (to one
# stripe) however long the row: a growing row keeps every rank busy, where contiguous chunks would leave the ranks past
# the row's end idle. A stripe is the decode kernels' 64-key tile. The attention of a query over a row is a sum over
# its keys in any order, so each rank attends to its own keys (decode_attention with return_lse on its local lengths)
# and the partial results merge by their log-sum-exps (merge_attention), after one all_gather of (out, lse).

STRIPE = 64


def owned_count(n, world: int, rank: int, stripe: int = STRIPE):
    """How many of the global positions [0, n) rank ``rank`` holds: n an int, or an int tensor (elementwise, on its
    device, with no read-back)."""
    _check(world, rank)
    full, rest = n // (stripe * world), n % (stripe * world)
    part = rest - rank * stripe
    if hasattr(part, "clamp"):
        return full * stripe + part.clamp(0, stripe)
    return full * stripe + min(max(part, 0), stripe)


def slot_of(p, world: int, stripe: int = STRIPE):
    """(owning rank, local slot) of global position ``p`` (an int or an int tensor)."""
    return (p // stripe) % world, (p // (stripe * world)) * stripe + p % stripe


def local_capacity(capacity: int, world: int, stripe: int = STRIPE) -> int:
    """Slots each rank's cache needs so that the ranks together hold ``capacity`` positions of a row."""
    return -(-capacity // (stripe * world)) * stripe


def shard_cache(cache, world: int, rank: int, *, stripe: int = STRIPE, kv_layout: str = "bhsd"):
    """Rank ``rank``'s cache (a new tensor of local_capacity slots, zeros past the positions it holds) of a global
    cache [b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd)."""
    import torch

    _check(world, rank)
    dim = 2 if kv_layout == "bhsd" else 1
    T = cache.shape[dim]
    index = [p for p in range(T) if (p // stripe) % world == rank]
    shape = list(cache.shape)
    shape[dim] = local_capacity(T, world, stripe)
    local = torch.zeros(shape, dtype=cache.dtype, device=cache.device)
    local.narrow(dim, 0, len(index)).copy_(cache.index_select(dim, torch.tensor(index, device=cache.device)))
    return local


class DecodeContextParallel:
    """Decode attention and decode steps over a cache sharded across the ranks of ``group`` (torch.distributed, any
    backend: NCCL for GPUs, gloo on the CPU), each rank holding the stripes of every row that round-robin deals it
    (module doc above; shard_cache makes a rank's cache from a global one). Every rank calls with the same q, new
    tokens and global lengths, its own caches, and gets the whole attention. ``ops``: where decode_attention and
    kv_append and merge_attention come from (cukiln's kernels; cukiln.reference runs the same on the CPU)."""

    def __init__(self, group=None, *, stripe: int = STRIPE, ops=None):
        import torch.distributed as dist

        import cukiln

        self.group, self.stripe, self.ops = group, stripe, ops or cukiln
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)

    def local_lengths(self, kv_lens, kv_start=None):
        """This rank's lengths of its local caches for global lengths ``kv_lens`` (and first slots ``kv_start``)."""
        lens = owned_count(kv_lens, self.world, self.rank, self.stripe)
        start = None if kv_start is None else owned_count(kv_start, self.world, self.rank, self.stripe)
        return lens, start

    def _merged(self, out, lse, return_lse: bool):
        import torch
        import torch.distributed as dist

        outs = [torch.empty_like(out) for _ in range(self.world)]
        lses = [torch.empty_like(lse) for _ in range(self.world)]
        dist.all_gather(outs, out.contiguous(), group=self.group)
        dist.all_gather(lses, lse.contiguous(), group=self.group)
        return self.ops.merge_attention(torch.stack(outs), torch.stack(lses), return_lse=return_lse)

    def decode_attention(self, q, k_local, v_local, kv_lens, *, kv_start=None, return_lse: bool = False, **kwargs):
        """decode_attention of q [b, h_q, d] over every rank's keys [kv_start, kv_lens) of each row (global
        positions): this rank's part on its caches, then the merge. ``kwargs``: decode_attention's (scale, softcap,
        k_scale, v_scale, kv_layout ...)."""
        lens, start = self.local_lengths(kv_lens, kv_start)
        out, lse = self.ops.decode_attention(q, k_local, v_local, lens, kv_start=start, return_lse=True, **kwargs)
        return self._merged(out, lse, return_lse)

    def decode_step(self, q, k_new, v_new, k_local, v_local, kv_lens, *, kv_start=None, return_lse: bool = False,
                    scale=None, softcap=None, kv_layout: str = "bhsd", **append_kwargs):
        """One decode step: each row's new token rotated at its position (kv_lens[i] - kv_start[i], or ``positions``,
        as decode_step takes them) and written to the rank that holds global slot kv_lens[i], then the attention over
        [kv_start, kv_lens + 1). ``kv_lens``: an int32 [b] tensor
        of the global lengths before the step (not advanced here). ``append_kwargs``: kv_append's rotation, QK-norm
        and FP8 scale arguments (the scales go to the attention too). Every rank rotates the whole query (kv_append
        into a one-slot scratch cache, which also rotates, normalizes and quantizes the new key as the caches hold
        it); the rank holding a row's new slot copies its key and value there. One collective a step: the merge's."""
        import torch

        bhsd = kv_layout == "bhsd"
        b, h_kv, d = k_new.shape
        scratch = [torch.empty(b, h_kv, 1, d, dtype=c.dtype, device=c.device) for c in (k_local, v_local)]
        # the new token's position, as decode_step takes it: its slot minus the row's first (or the one given)
        positions = append_kwargs.pop("positions", None)
        if positions is None:
            positions = kv_lens.to(torch.int64) - (0 if kv_start is None else kv_start.to(torch.int64))
        q_rot = self.ops.kv_append(q, k_new, v_new, *scratch, 0, positions=positions, **append_kwargs)
        owner, slot = slot_of(kv_lens.to(torch.int64), self.world, self.stripe)
        capacity = k_local.shape[2 if bhsd else 1]
        mine = (owner == self.rank).view(-1, 1, 1)
        slot = slot.clamp(max=capacity - 1)  # a row this rank does not hold rewrites a slot of its own unchanged
        rows = torch.arange(b, device=kv_lens.device)
        for cache, new in zip((k_local, v_local), scratch):
            bytes_, new = cache.view(torch.uint8), new[:, :, 0].view(torch.uint8)  # any dtype, FP8 too, bit for bit
            old = bytes_[rows, :, slot] if bhsd else bytes_[rows, slot]
            chosen = torch.where(mine, new, old)
            if bhsd:
                bytes_[rows, :, slot] = chosen
            else:
                bytes_[rows, slot] = chosen
        scales = {n: append_kwargs[n] for n in ("k_scale", "v_scale") if n in append_kwargs}
        return self.decode_attention(q_rot.to(q.dtype), k_local, v_local, kv_lens + 1, kv_start=kv_start,
                                     return_lse=return_lse, scale=scale, softcap=softcap, kv_layout=kv_layout,
                                     **scales)


def join_torchrun(gpus: bool = True):
    """This process's (rank, world size, device) in the job torchrun started (its RANK, WORLD_SIZE and LOCAL_RANK),
    the process group begun: NCCL with one GPU a process (``gpus``), or gloo on the CPU."""
    import os

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if gpus:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if gpus else "gloo", device_id=device if gpus else None)
    return rank, world, device
