"""Decode over a KV cache sharded across GPUs (cukiln.context_parallel.DecodeContextParallel): the time of one decode
step's attention, the collective included, at long contexts, beside one GPU's decode of the same cache where it fits.

    torchrun --standalone --nproc-per-node=N benchmarks/decode_cp_bench.py [--out JSON] [--lengths 131072,524288]

Every rank holds its stripes of each row (bf16, GQA 32/8, d 128); rank 0 prints a table and writes the JSON. One
process per GPU (NCCL). With N = 1 it times cukiln.decode_attention on the whole cache (the single-GPU figure).
``--device cpu`` runs the same on gloo with the float64 references and tiny sizes: a check of the script, not a
measurement.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.distributed as dist

HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
BATCHES = (1, 8)
LENGTHS = (131072, 524288, 1048576)
REPEATS = 20


def _timed(step, gpus: bool) -> float:
    """Median ms of ``step`` over REPEATS calls, after a warm-up, every rank in step (a barrier before each)."""
    step()
    times = []
    for _ in range(REPEATS):
        dist.barrier()
        if gpus:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--lengths", help="comma-separated cache lengths (default 128k, 512k, 1M)")
    p.add_argument("--out", metavar="JSON")
    args = p.parse_args()
    gpus = args.device == "cuda"
    import cukiln
    from cukiln.context_parallel import DecodeContextParallel, join_torchrun, local_capacity

    rank, world, device = join_torchrun(gpus)

    ops = cukiln if gpus else cukiln.reference
    dtype = torch.bfloat16 if gpus else torch.float64
    lengths = [int(n) for n in args.lengths.split(",")] if args.lengths else (LENGTHS if gpus else (1024,))
    cp = DecodeContextParallel(ops=ops)
    rows = []
    try:
        for b in BATCHES:
            for T in lengths:
                capacity = local_capacity(T, world)
                try:  # each rank's stripes (random values: the time does not depend on them)
                    k, v = (torch.randn(b, HEADS_KV, capacity, HEAD_DIM, device=device).to(dtype) for _ in range(2))
                except torch.OutOfMemoryError:
                    rows.append({"batch": b, "T": T, "gpus": world, "skipped": "out of memory"})
                    continue
                q = torch.randn(b, HEADS_Q, HEAD_DIM, device=device).to(dtype)
                lens = torch.full((b,), T, dtype=torch.int32, device=device)
                if world == 1:  # the single-GPU figure: the plain decode of the whole cache
                    ms = _timed(lambda: ops.decode_attention(q, k, v, lens), gpus)
                else:
                    ms = _timed(lambda: cp.decode_attention(q, k, v, lens), gpus)
                kv_bytes = 2 * b * HEADS_KV * T * HEAD_DIM * 2
                rows.append({"batch": b, "T": T, "gpus": world, "ms": ms, "kv_bytes_total": kv_bytes,
                             "tbps_total": kv_bytes / ms / 1e9})
                del k, v
                if gpus:
                    torch.cuda.empty_cache()
        if rank == 0:
            print(f"decode attention over a cache sharded on {world} {'GPUs' if gpus else 'CPU ranks (a check)'}:")
            for r in rows:
                print(f"  b {r['batch']:3d} T {r['T']:8d}: " + (r["skipped"] if "skipped" in r else
                      f"{r['ms'] * 1e3:9.1f} us, {r['tbps_total']:.2f} TB/s of the whole cache's K+V"))
            if args.out:
                name = torch.cuda.get_device_name(0) if gpus else "cpu"
                with open(args.out, "w") as f:
                    json.dump({"benchmark": "decode_cp", "device": name, "gpus": world, "dtype": str(dtype),
                               "shape": {"heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM},
                               "command": f"torchrun --nproc-per-node={world} benchmarks/decode_cp_bench.py",
                               "rows": rows}, f, indent=1)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
