"""Context parallel RoPE across processes: each rank rotates its shard, an all-gather puts the shards back.

Run with torchrun, one process per GPU (NCCL) or on the CPU (gloo, with the float64 reference in place
of the kernels, which checks the sharding arithmetic without a GPU):

    torchrun --standalone --nproc-per-node=2 tests/distributed/cp_rope_worker.py --device cuda
    torchrun --standalone --nproc-per-node=4 tests/distributed/cp_rope_worker.py --device cpu

Rank 0 makes the global batch (thd with cu_seqlens, and sbhd) and broadcasts it; every rank runs rope
forward and backward on its two load-balanced chunks per sequence with its cp_rank, gathers every
rank's result and checks that it equals rope on the whole global batch, bit for bit. Exits non-zero on
any difference.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import cukiln
from cukiln.context_parallel import reassemble, shard
from ranks import begin  # this folder's, beside the script torchrun runs

HEADS, HEAD_DIM = 4, 64


def gathered(local, world: int):
    parts = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(parts, local.contiguous())
    return parts


def check(name: str, rank: int, got, want) -> None:
    if not torch.equal(got, want):
        bad = (got != want).sum().item()
        raise AssertionError(f"rank {rank}: {name}: {bad} of {want.numel()} elements differ from single-device rope")
    print(f"rank {rank}: {name}: equal to single-device rope ({want.numel()} elements)", flush=True)


def main() -> None:
    gpus, rank, world, device = begin()
    dtype, rope = (torch.bfloat16, cukiln.rope) if gpus else (torch.float32, cukiln.reference.rope)
    try:
        chunk = 2 * world
        lengths = [chunk * n for n in (3, 17, 1, 40, 8)]
        total, max_pos = sum(lengths), max(lengths) + 16
        cu = torch.tensor([0] + lengths).cumsum(0).to(torch.int32)
        x = torch.empty(total, HEADS, HEAD_DIM, dtype=dtype, device=device)
        dense = torch.empty(chunk * 24, 2, HEADS, HEAD_DIM, dtype=dtype, device=device)
        freqs = torch.empty(max_pos, 1, 1, HEAD_DIM, dtype=torch.float32, device=device)
        if rank == 0:
            gen = torch.Generator().manual_seed(2026)
            for t in (x, dense):
                t.copy_(torch.randn(t.shape, generator=gen))
            freqs.copy_(torch.rand(freqs.shape, generator=gen) * 100)
        for t in (x, dense, freqs):
            dist.broadcast(t, 0)
        cu_dev = cu.to(device)
        for backward in (False, True):
            direction = "backward" if backward else "forward"
            thd = dict(freqs=freqs, layout="thd", cu_seqlens=cu_dev, backward=backward)
            local = rope(shard(x, world, rank, cu_seqlens=cu), cp_size=world, cp_rank=rank, **thd)
            check(f"thd {direction}", rank, reassemble(gathered(local, world), cu_seqlens=cu), rope(x, **thd))
            sbhd = dict(freqs=freqs, layout="sbhd", backward=backward)
            local = rope(shard(dense, world, rank, seq_dim=0), cp_size=world, cp_rank=rank, **sbhd)
            check(f"sbhd {direction}", rank, reassemble(gathered(local, world), seq_dim=0), rope(dense, **sbhd))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
