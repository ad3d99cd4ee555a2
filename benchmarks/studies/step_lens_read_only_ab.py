"""A compiled decode step whose specialized op declares kv_lens written (A: as the op itself does) against one that
declares it read-only where advance_lens is the constant False (B: the default, torch_support.WRITTEN_ONLY_WITH), in
one process on the GPU: the decode_step cases of `benchmarks/compiled_bounds.py` (compiled in default mode and under
reduce-overhead with every input static, the op through the dispatcher as itself, a control, and specialized),
each built on both sides and B paired with A (folded_numbers_ab.py's run_ab), 15 rounds.

    python benchmarks/studies/step_lens_read_only_ab.py OUT_DIR

Writes OUT_DIR/step-lens-read-only-ab.json and prints a table.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from cukiln.torch_support import WRITTEN_ONLY_WITH
from folded_numbers_ab import run_ab


@contextmanager
def lens_written():
    """Side A: no argument declared read-only by its flag in the specialized ops defined meanwhile."""
    kept = dict(WRITTEN_ONLY_WITH)
    WRITTEN_ONLY_WITH.clear()
    try:
        yield
    finally:
        WRITTEN_ONLY_WITH.update(kept)


if __name__ == "__main__":
    run_ab(sys.argv[1], "step-lens-read-only-ab", lens_written,
           "python benchmarks/studies/step_lens_read_only_ab.py OUT_DIR", only=lambda label: "decode_step" in label,
           rounds=15)
