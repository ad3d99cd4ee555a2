"""Device-to-device copy bandwidth by size: how far a copy of a benchmark's own bytes is from the 1 GiB
copy that `cukiln bench` divides by (launch ramp and tail weigh more on small transfers).

    python benchmarks/copy_sizes.py
"""

from __future__ import annotations

import torch

from cukiln.tools.timing import median_ms, rotating_sets, tbps

SIZES_MB = (16, 32, 64, 100, 128, 256, 512, 1024)


def main() -> None:
    reference = None
    for mb in reversed(SIZES_MB):
        nbytes = mb * 2**20
        sets = rotating_sets(lambda: (torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255),
                                      torch.empty(nbytes, dtype=torch.uint8, device="cuda")), 2 * nbytes)
        ms = median_ms([lambda s=s: s[1].copy_(s[0]) for s in sets])
        rate = tbps(2 * nbytes, ms)
        reference = reference or rate
        print(f"copy {mb:5d} MiB: {ms * 1e3:8.1f} us {rate:6.3f} TB/s  {rate / reference:.3f}x the 1 GiB copy")
        del sets


if __name__ == "__main__":
    main()
