"""Decode context parallel across processes: every rank holds the stripes of each row's cache that round-robin deals
it, attends to its own keys, and the ranks merge (DecodeContextParallel); then a decode step appends each row's new
token on the rank that holds its slot.

    torchrun --standalone --nproc-per-node=2 tests/distributed/cp_decode_worker.py --device cuda
    torchrun --standalone --nproc-per-node=4 tests/distributed/cp_decode_worker.py --device cpu

Rank 0 makes the global caches, query and new tokens and broadcasts them. Every rank checks:
- the merged attention against decode_attention on the whole cache;
- the step's output against decode_step on the whole cache;
- every rank's cache, put back together, against the whole cache after that step;
- the step again over FP8 caches with scales, output and caches alike.

On the CPU (gloo) the float64 references stand in for the kernels: the merge is then exact to float64 rounding. On
GPUs (NCCL) with bf16 caches, each rank's partial output is rounded to bf16 before the merge, which sums them in fp32:
the merged output is within 2^-7 of the largest output value of the single-GPU one (two bf16 roundings; the lse
within 1e-5). Exits non-zero on any difference past that.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import cukiln
from cukiln.context_parallel import STRIPE, DecodeContextParallel, shard_cache, slot_of
from ranks import begin  # this folder's, beside the script torchrun runs

B, HQ, HKV, D, T = 3, 8, 2, 64, 700


def check(name: str, rank: int, got, want, tolerance: float) -> None:
    error = (got.double() - want.double()).abs().max().item()
    bound = tolerance * max(want.double().abs().max().item(), 1.0)
    if not error <= bound:
        raise AssertionError(f"rank {rank}: {name}: error {error:.3g} past {bound:.3g}")
    print(f"rank {rank}: {name}: within {bound:.3g} of the whole cache's ({error:.3g})", flush=True)


def whole(local, world: int, rank: int):
    """The global cache [b, h_kv, T, d] from every rank's local cache (an all_gather of their bytes, which every
    backend takes whatever the dtype, FP8 too; then each position from its owner)."""
    data = local.contiguous().view(torch.uint8)
    parts = [torch.empty_like(data) for _ in range(world)]
    dist.all_gather(parts, data)
    out = torch.empty(data.shape[0], data.shape[1], T, data.shape[3], dtype=torch.uint8, device=local.device)
    for p in range(T):
        owner, slot = slot_of(p, world)
        out[:, :, p] = parts[owner][:, :, slot]
    return out.view(local.dtype)


def main() -> None:
    gpus, rank, world, device = begin()
    # bf16 partial outputs merged in fp32 on GPUs; the float64 references on the CPU
    dtype, ops, tolerance, lse_tolerance = (torch.bfloat16, cukiln, 2.0 ** -7, 1e-5) if gpus else \
        (torch.float64, cukiln.reference, 1e-12, 1e-12)
    try:
        gen = torch.Generator(device="cpu").manual_seed(7)
        q, k_new, v_new = (torch.randn(B, h, D, generator=gen).to(dtype).to(device) for h in (HQ, HKV, HKV))
        k, v = (torch.randn(B, HKV, T, D, generator=gen).to(dtype).to(device) for _ in range(2))
        for t in (q, k_new, v_new, k, v):
            dist.broadcast(t, 0)  # every rank holds rank 0's draw
        lens = torch.tensor([T - 1, 1, 333], dtype=torch.int32, device=device)
        start = torch.tensor([0, 0, 3 * STRIPE + 5], dtype=torch.int32, device=device)
        cp = DecodeContextParallel(ops=ops)
        k_local, v_local = (shard_cache(c, world, rank) for c in (k, v))

        got, got_lse = cp.decode_attention(q, k_local, v_local, lens, kv_start=start, return_lse=True)
        want, want_lse = ops.decode_attention(q, k, v, lens, kv_start=start, return_lse=True)
        check("decode_attention", rank, got, want, tolerance)
        check("its log-sum-exp", rank, got_lse, want_lse, lse_tolerance)

        angles = dict(base=1e4)
        got = cp.decode_step(q, k_new, v_new, k_local, v_local, lens, kv_start=start, **angles)
        k_want, v_want = k.clone(), v.clone()
        want = ops.decode_step(q, k_new, v_new, k_want, v_want, lens.clone(), kv_start=start, **angles)
        check("decode_step", rank, got, want, tolerance)
        check("the caches after the step, put back together", rank,
              torch.stack((whole(k_local, world, rank), whole(v_local, world, rank))),
              torch.stack((k_want, v_want)), tolerance)

        # FP8 caches with a key scale per KV head: the step's new key and value quantized on the rank that holds them
        scales = {"k_scale": torch.tensor([0.02, 0.05], device=device), "v_scale": 0.03}
        k8, v8 = ((c.float() / 0.03).to(torch.float8_e4m3fn) for c in (k, v))
        k8_local, v8_local = (shard_cache(c, world, rank) for c in (k8, v8))
        got = cp.decode_step(q, k_new, v_new, k8_local, v8_local, lens, kv_start=start, **angles, **scales)
        k8_want, v8_want = k8.clone(), v8.clone()
        want = ops.decode_step(q, k_new, v_new, k8_want, v8_want, lens.clone(), kv_start=start, **angles, **scales)
        check("decode_step over FP8 caches", rank, got, want, tolerance)
        # the kernels quantize the new token as the references do, or one e4m3 step apart (fp32 against float64)
        put_back = torch.stack((whole(k8_local, world, rank), whole(v8_local, world, rank))).view(torch.uint8)
        steps = (put_back.int() - torch.stack((k8_want, v8_want)).view(torch.uint8).int()).abs()
        if steps.max() > (1 if gpus else 0):
            raise AssertionError(f"rank {rank}: the FP8 caches after the step: codes {steps.max().item()} apart")
        print(f"rank {rank}: the FP8 caches after the step, put back together: within a step of the whole cache's",
              flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
