"""Does decode attention's speed depend on where V lies relative to K? (DRAM address mapping)

The attention kernel loads a tile's K rows and V rows (same key offsets) at the same moment; torch SDPA's
kernel loads them at different points of its loop. This script times both on the bench's shape with V
placed at several byte offsets from K inside one allocation, beside separate allocations:

    python benchmarks/studies/decode_kv_offset.py [--out F] [--cases 128x2048,32x8192]

Prints, per case and placement, cukiln's and SDPA's time and cukiln's ratio to SDPA.
"""

from __future__ import annotations

import argparse
import json

import torch

import cukiln
from cukiln.tools.decode import CAPACITY_SLACK, HEAD_DIM, HEADS_KV, HEADS_Q, kv_bytes, torch_sdpa
from cukiln.tools.timing import median_ms

CASES = ((128, 2048), (128, 32768), (32, 8192), (8, 32768))
# V's start past the end of K's buffer, in bytes (None: a separate allocation)
PLACEMENTS = (None, 0, 4096, 65536, 1 << 20, (1 << 20) + 4096, 3 * 4096 + 256)


def _sets(b: int, T: int, gap: int | None, count: int):
    rows = b * HEADS_KV * (T + CAPACITY_SLACK) * HEAD_DIM
    sets = []
    for _ in range(count):
        q = torch.randn(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        if gap is None:
            k, v = (torch.randn(rows, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        else:
            buf = torch.randn(2 * rows + gap // 2, device="cuda", dtype=torch.bfloat16)
            k, v = buf[:rows], buf[rows + gap // 2: 2 * rows + gap // 2]
        shape = (b, HEADS_KV, T + CAPACITY_SLACK, HEAD_DIM)
        sets.append((q, k.view(shape)[:, :, :T], v.view(shape)[:, :, :T]))
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--cases")
    args = parser.parse_args()
    cases = [tuple(int(n) for n in c.split("x")) for c in args.cases.split(",")] if args.cases else CASES
    rows = []
    for b, T in cases:
        count = max(2, min(4, (1 << 30) // kv_bytes(b, T)))
        for gap in PLACEMENTS:
            sets = _sets(b, T, gap, count)
            outs = [torch.empty(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in sets]
            ours = median_ms([lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o) for s, o in zip(sets, outs)])
            sdpa = median_ms([lambda s=s: torch_sdpa(*s) for s in sets])
            rows.append({"batch": b, "T": T, "v_gap_bytes": gap, "cukiln_ms": ours, "sdpa_ms": sdpa})
            print(f"b={b:4d} T={T:6d} V {'separate' if gap is None else f'+{gap} B':>12}: cukiln {ours * 1e3:8.1f} us"
                  f"  sdpa {sdpa * 1e3:8.1f} us  ratio {sdpa / ours:.3f}", flush=True)
            del sets, outs
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
