"""Is the first RoPE case of a shape in `cukiln bench rope` slower because it is first? (bench artifact check)

Times cukiln forward and backward on [4096, 2, 32, 128] sbhd bf16 exactly as the bench's cases do (fresh
rotating buffers and angle table per case), in the order fwd, bwd, fwd, bwd, then bwd, fwd, bwd, fwd on
one set of buffers, and prints each against the same-run copy:

    python benchmarks/studies/rope_case_order.py
"""

from __future__ import annotations

import torch

import cukiln
from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets, tbps

SHAPE = (4096, 2, 32, 128)


def main() -> None:
    copy = copy_tbps()
    S, B, H, D = SHAPE
    x_bytes = S * B * H * D * 2
    print(f"1 GiB copy {copy:.3f} TB/s")

    def fresh():
        freqs = torch.rand(S, 1, 1, D, device="cuda") * 100
        sets = rotating_sets(lambda: (torch.randn(SHAPE, device="cuda", dtype=torch.bfloat16),
                                      torch.empty(SHAPE, device="cuda", dtype=torch.bfloat16)), 2 * x_bytes)
        return freqs, sets

    def timed(freqs, sets, backward):
        ms = median_ms([lambda x=x, o=o: cukiln.rope(x, freqs=freqs, out=o, backward=backward) for x, o in sets])
        return tbps(2 * x_bytes + freqs.numel() * 4, ms) / copy

    for backward in (False, True, False, True):
        freqs, sets = fresh()
        print(f"fresh buffers, {'bwd' if backward else 'fwd'}: {timed(freqs, sets, backward):.3f}x copy")
        del sets
    freqs, sets = fresh()
    for backward in (True, False, True, False):
        print(f"same buffers,  {'bwd' if backward else 'fwd'}: {timed(freqs, sets, backward):.3f}x copy")


if __name__ == "__main__":
    main()
