"""Device-to-device copy bandwidth by size: how far a copy of a benchmark's own bytes is from the 1 GiB
copy that `cukiln bench` divides by (launch ramp and tail weigh more on small transfers).

    python benchmarks/copy_sizes.py
"""

from __future__ import annotations

from cukiln.tools.timing import copy_tbps

SIZES_MB = (16, 32, 64, 100, 128, 256, 512, 1024)


def main() -> None:
    reference = None
    for mb in reversed(SIZES_MB):
        rate = copy_tbps(mb * 2**20, rotate=True)
        reference = reference or rate
        print(f"copy {mb:5d} MiB: {2 * mb * 2**20 / rate / 1e6:8.1f} us {rate:6.3f} TB/s  "
              f"{rate / reference:.3f}x the 1 GiB copy")


if __name__ == "__main__":
    main()
