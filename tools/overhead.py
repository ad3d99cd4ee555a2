"""`cukiln bench overhead` (GPU): host microseconds per call on a tiny tensor, where the kernel itself
takes about as long as an empty one, so the figure is what a call costs the CPU.

Each path runs ``CALLS`` times and then synchronizes once; the paths take turns over ``ROUNDS`` rounds
and each figure is the median round (a shared CPU is noisy: turns spread the noise over every path).
The paths: ``cukiln.rope`` (in place, base angles, and out of place with a freqs table);
``cukiln.torch.rope`` in eager inference (it calls the kernel directly), with a gradient wanted (the
custom op and its autograd node), and the ops themselves through the dispatcher; a
``torch.compile(fullgraph=True)`` function calling the op; one replay of a CUDA graph holding the call;
tiny PyTorch ops beside them. A breakdown of ``cukiln.rope`` follows: the
plan-cache hit with the pointer refill, the bound kernel's launch, and cuLaunchKernel alone.
"""

from __future__ import annotations

import statistics
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from .timing import run_metadata

CALLS = 10_000
ROUNDS = 7


def per_call_us(fn, calls: int = CALLS) -> float:
    """Host µs per call of ``fn``: ``calls`` calls, then one synchronize."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def _paths() -> dict:
    """name -> zero-argument callable, warmed up (modules loaded, plans cached, graphs compiled)."""
    import torch

    import cukiln
    import cukiln.torch
    from cukiln import rope_api
    from cukiln.launch import kernel

    x = torch.randn(1, 1, 1, 64, device="cuda")
    freqs = torch.rand(1, 64, device="cuda")
    out = torch.empty_like(x)

    def compiled_body(t):
        return cukiln.torch.rope(t, base=10000.0, inplace=True)

    compiled = torch.compile(compiled_body, fullgraph=True)

    graph_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm outside the capture: the module loads, the plan is cached
        cukiln.rope(graph_x, base=10000.0, inplace=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cukiln.rope(graph_x, base=10000.0, inplace=True)

    cached, values, _, _ = rope_api._prepare(x, base=10000.0, inplace=True)
    p = cached.plan
    bound = kernel(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, 0, p.overlap_previous)
    stream = torch.cuda.current_stream().cuda_stream
    op_args = (None, None, None, None, 10000.0, 1.0, "sbhd", False, None, None, None, None, None, 1, 0, None, False)
    x_grad = x.clone().requires_grad_(True)

    paths = {
        "cukiln.rope (in place, base)": lambda: cukiln.rope(x, base=10000.0, inplace=True),
        "cukiln.rope (out=, freqs)": lambda: cukiln.rope(x, freqs=freqs, out=out),
        "cukiln.rope (allocates out, freqs)": lambda: cukiln.rope(x, freqs=freqs),
        "cukiln.torch.rope (eager, in place, base)": lambda: cukiln.torch.rope(x, base=10000.0, inplace=True),
        "cukiln.torch.rope (eager, allocates out, freqs)": lambda: cukiln.torch.rope(x, freqs=freqs),
        "cukiln.torch.rope (x requires grad: op + autograd)": lambda: cukiln.torch.rope(x_grad, base=10000.0),
        "op cukiln::rope_ through the dispatcher (in place)": lambda: torch.ops.cukiln.rope_(x, *op_args),
        "op cukiln::rope through the dispatcher (allocates)": lambda: torch.ops.cukiln.rope(x, *op_args),
        "torch.compile(fullgraph) of cukiln.torch.rope": lambda: compiled(x),
        "CUDA graph replay of cukiln.rope": graph.replay,
        "torch: x.add_(1.0)": lambda: x.add_(1.0),
        "torch: x + 1.0 (allocates)": lambda: x + 1.0,
        "breakdown: plan-cache hit and pointer refill": lambda: rope_api._prepare(x, base=10000.0, inplace=True),
        "breakdown: bound kernel launch (pack, context check, launch)": lambda: bound(values, stream),
        "breakdown: cuLaunchKernel alone": _bare_launch(bound, values, stream),
    }
    for fn in paths.values():
        for _ in range(200):
            fn()
    torch.cuda.synchronize()
    return paths


def _bare_launch(bound, values, stream):
    """cuLaunchKernel with the parameters packed once and no context check: the driver's share."""
    import ctypes

    from cuda.bindings import driver

    params = ctypes.create_string_buffer(4096)
    bound.packer.pack_into(params, 0, *values)
    pointers = (ctypes.c_void_p * 1)(ctypes.addressof(params))
    address = ctypes.addressof(pointers)
    grid, block = bound.grid, bound.block

    def launch():
        driver.cuLaunchKernel(bound.function, *grid, *block, 0, stream, address, 0)

    return launch


def measure(rounds: int = ROUNDS, calls: int = CALLS, advance=lambda: None) -> dict:
    """Median host µs per call of every path, with each round's figures (``advance`` after each round)."""
    paths = _paths()
    samples = {name: [] for name in paths}
    for _ in range(rounds):
        for name, fn in paths.items():
            samples[name].append(per_call_us(fn, calls))
        advance()
    return {name: {"us_per_call": statistics.median(s), "rounds_us": s} for name, s in samples.items()}


def run(console: Console, quick: bool = False) -> dict:
    rounds, calls = (2, 1000) if quick else (ROUNDS, CALLS)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("overhead rounds (warm-up and torch.compile first)", total=rounds)
        figures = measure(rounds, calls, lambda: progress.advance(task))
    return {**run_metadata("overhead", "cukiln bench overhead" + (" --quick" if quick else "")),
            "calls_per_round": calls, "paths": figures}


def print_result(result: dict, console: Console) -> None:
    table = Table(title=f"host overhead on {result['device']} (tiny tensor; median of "
                        f"{len(next(iter(result['paths'].values()))['rounds_us'])} rounds of "
                        f"{result['calls_per_round']} calls)", title_justify="left")
    table.add_column("path")
    table.add_column("µs/call (median)", justify="right")
    table.add_column("best round", justify="right")
    table.add_column("worst round", justify="right")
    for name, f in result["paths"].items():
        table.add_row(name, f"{f['us_per_call']:.2f}", f"{min(f['rounds_us']):.2f}", f"{max(f['rounds_us']):.2f}")
    console.print(table)
