"""Context parallel sharding: the index arithmetic on the CPU, then ranks in separate processes (torchrun):
gloo with the float64 reference here, NCCL with the kernels on a machine with 2 or 4 GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cukiln
from cukiln.context_parallel import reassemble, shard, shard_index

WORKER = Path(__file__).with_name("cp_rope_worker.py")


@pytest.mark.parametrize("cp_size", [1, 2, 3, 4])
def test_ranks_hold_every_token_once_and_reassemble_restores_the_batch(cp_size):
    lengths = [2 * cp_size * n for n in (1, 5, 2)]
    held = [shard_index(lengths, cp_size, r) for r in range(cp_size)]
    assert sorted(i for h in held for i in h) == list(range(sum(lengths)))
    assert all(len(h) == sum(lengths) // cp_size for h in held)
    cu = torch.tensor([0] + lengths).cumsum(0)
    x = torch.randn(sum(lengths), 3, 8)
    parts = [shard(x, cp_size, r, cu_seqlens=cu) for r in range(cp_size)]
    assert torch.equal(reassemble(parts, cu_seqlens=cu), x)
    dense = torch.randn(2, 4 * cp_size, 3, 8)  # bshd: the sequence is dimension 1
    assert torch.equal(reassemble([shard(dense, cp_size, r, seq_dim=1) for r in range(cp_size)], seq_dim=1), dense)


def test_rank_chunks_follow_the_load_balanced_split():
    # 2 ranks, one sequence of 8 tokens in 4 chunks of 2: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    assert shard_index([8], 2, 0) == [0, 1, 6, 7]
    assert shard_index([8], 2, 1) == [2, 3, 4, 5]
    assert shard_index([4, 8], 2, 1) == [1, 2, 4 + 2, 4 + 3, 4 + 4, 4 + 5]


@pytest.mark.parametrize("cp_size", [2, 4])
def test_the_reference_on_each_shard_matches_the_global_reference(cp_size):
    lengths = [2 * cp_size * n for n in (3, 1, 6)]
    cu = torch.tensor([0] + lengths).cumsum(0).to(torch.int32)
    x = torch.randn(sum(lengths), 2, 16, dtype=torch.float64)
    freqs = torch.rand(max(lengths), 1, 1, 16) * 10
    want = cukiln.reference.rope(x, freqs=freqs, layout="thd", cu_seqlens=cu)
    parts = [cukiln.reference.rope(shard(x, cp_size, r, cu_seqlens=cu), freqs=freqs, layout="thd", cu_seqlens=cu,
                                   cp_size=cp_size, cp_rank=r) for r in range(cp_size)]
    assert torch.equal(reassemble(parts, cu_seqlens=cu), want)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="not divisible by 2 \\* cp_size = 4"):
        shard_index([6], 2, 0)
    with pytest.raises(ValueError, match="cp_rank"):
        shard_index([8], 2, 2)
    with pytest.raises(ValueError, match="cu_seqlens covers 8 tokens, x has 9"):
        shard(torch.zeros(9, 1, 2), 2, 0, cu_seqlens=torch.tensor([0, 8]))
    with pytest.raises(ValueError, match="equal shapes"):
        reassemble([torch.zeros(4, 1), torch.zeros(2, 1)])


def run_torchrun(nproc: int, device: str, timeout: int, worker: Path = WORKER) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(worker),
           "--device", device]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("nproc", [2, 4])
def test_torchrun_gloo_shards_and_gathers_to_the_global_result(nproc):
    done = run_torchrun(nproc, "cpu", timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.count("equal to single-device rope") == 4 * nproc




# --- decode context parallel ---------------------------------------------------------------------------------------

DECODE_WORKER = Path(__file__).with_name("cp_decode_worker.py")


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_stripes_deal_every_position_once_and_count_what_each_rank_holds(world):
    from cukiln.context_parallel import STRIPE, local_capacity, owned_count, shard_cache, slot_of

    T = 5 * STRIPE * world + 17
    slots = [slot_of(p, world) for p in range(T)]
    assert len(set(slots)) == T and all(s < local_capacity(T, world) for _, s in slots)
    for rank in range(world):
        mine = [s for o, s in slots if o == rank]
        assert mine == list(range(len(mine)))  # in order, contiguous
        for n in (0, 1, STRIPE, STRIPE * world + 3, T):
            assert owned_count(n, world, rank) == sum(1 for p in range(n) if slots[p][0] == rank)
        lens = torch.tensor([0, 5, T])
        assert owned_count(lens, world, rank).tolist() == [owned_count(int(n), world, rank) for n in lens]
    cache = torch.randn(2, 3, T, 4)
    local = shard_cache(cache, world, 0)
    assert torch.equal(local[:, :, 1], cache[:, :, 1]) and local.shape[2] == local_capacity(T, world)


def test_merged_partials_equal_the_attention_over_the_union_of_their_keys():
    merge = cukiln.reference.merge_attention

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 64, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 4, 90, 64, generator=gen, dtype=torch.float64) for _ in range(2))
    want, want_lse = cukiln.reference.decode_attention(q, k, v, 90, return_lse=True)
    cuts = [(0, 10), (10, 10), (10, 57), (57, 90)]  # an empty part among them
    parts = [cukiln.reference.decode_attention(q, k[:, :, a:b], v[:, :, a:b], b - a, return_lse=True)
             for a, b in cuts]
    got, got_lse = merge(torch.stack([o for o, _ in parts]), torch.stack([s for _, s in parts]), return_lse=True)
    assert torch.allclose(got, want, rtol=0, atol=1e-12) and torch.allclose(got_lse, want_lse, rtol=0, atol=1e-12)
    empty = torch.full((3, 2, 4), float("-inf"))
    out, lse = merge(torch.zeros(3, 2, 4, 64, dtype=torch.bfloat16), empty, return_lse=True)
    assert torch.equal(out, torch.zeros(2, 4, 64, dtype=torch.float64)) and torch.isneginf(lse).all()
    bad = torch.zeros(3, 2, 4)
    bad[1, 0, 0] = float("nan")
    out, lse = merge(torch.ones(3, 2, 4, 64, dtype=torch.bfloat16), bad, return_lse=True)
    assert out[0, 0].isnan().all() and lse[0, 0].isnan() and not out[1].isnan().any()


@pytest.mark.parametrize("nproc", [2, 4])
def test_torchrun_gloo_decode_over_striped_caches_equals_the_whole_cache(nproc):
    done = run_torchrun(nproc, "cpu", timeout=240, worker=DECODE_WORKER)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.count("of the whole cache's") == 6 * nproc


# each worker's NCCL run on 2 and 4 GPUs: every rank prints each check it passed
@pytest.mark.gpu
@pytest.mark.parametrize("nproc", [2, 4])
@pytest.mark.parametrize("worker, passed, checks", [(WORKER, "equal to single-device rope", 4),
                                                    (DECODE_WORKER, "of the whole cache's", 6)], ids=["rope", "decode"])
def test_torchrun_nccl_equals_one_device(nproc, worker, passed, checks):
    if torch.cuda.device_count() < nproc:
        pytest.skip(f"needs {nproc} GPUs, this machine has {torch.cuda.device_count()}")
    done = run_torchrun(nproc, "cuda", timeout=300, worker=worker)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.count(passed) == checks * nproc
