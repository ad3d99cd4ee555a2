"""What every torchrun worker here starts with: its --device, and its place in the job (context_parallel.join_torchrun:
the process group begun, NCCL on GPUs, gloo on the CPU)."""

from __future__ import annotations

import argparse

from cukiln.context_parallel import join_torchrun


def begin():
    """(whether on GPUs, rank, world size, this rank's device)."""
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    gpus = p.parse_args().device == "cuda"
    return (gpus, *join_torchrun(gpus))
