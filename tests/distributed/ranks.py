"""What every torchrun worker here starts with: its --device, rank and world from torchrun's environment, the device
bound and the process group begun (NCCL on GPUs, gloo on the CPU)."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist


def begin() -> tuple[bool, int, int, torch.device]:
    """(whether on GPUs, rank, world size, this rank's device), the process group begun."""
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    gpus = p.parse_args().device == "cuda"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if gpus:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if gpus else "gloo", device_id=device if gpus else None)
    return gpus, rank, world, device
