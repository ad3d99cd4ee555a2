"""GPU timing shared by bench (and later tune): CUDA events, warm-up, median, rotating inputs."""

from __future__ import annotations

import statistics
import time

# About 2 ms of GPU clock: more than the host needs to queue one batch of calls.
QUEUE_AHEAD_CYCLES = 4_000_000
WARMUP_SECONDS = 0.05


def median_ms(calls, *, warmup: int = 3, batches: int = 15, min_batch_calls: int = 8) -> float:
    """Median time of one call in milliseconds.

    ``calls`` is a list of zero-argument callables, one per rotating input set: each batch runs them in
    turn (at least ``min_batch_calls`` calls) between two CUDA events, so consecutive calls read
    different buffers and the L2 cache does not serve the data.
    """
    _warm(calls, warmup)
    return statistics.median(_batch_ms(calls, max(min_batch_calls, len(calls))) for _ in range(batches))


def medians_ms(candidates: dict, *, warmup: int = 3, batches: int = 15, min_batch_calls: int = 8) -> dict:
    """median_ms of every candidate (key -> its calls), their batches taken in turn, round by round: a drift of the
    GPU's clock or of the host while they are measured falls on every candidate alike, not on the last ones."""
    for calls in candidates.values():
        _warm(calls, warmup)
    times = {key: [] for key in candidates}
    for _ in range(batches):
        for key, calls in candidates.items():
            times[key].append(_batch_ms(calls, max(min_batch_calls, len(calls))))
    return {key: statistics.median(t) for key, t in times.items()}


def _warm(calls, warmup: int) -> None:
    """At least ``warmup`` rounds of ``calls`` and WARMUP_SECONDS of work, so that clocks have left idle."""
    import torch

    started = time.perf_counter()
    rounds = 0
    while rounds < warmup or time.perf_counter() - started < WARMUP_SECONDS:
        for fn in calls:
            fn()
        torch.cuda.synchronize()
        rounds += 1


def _batch_ms(calls, per_batch: int) -> float:
    """Milliseconds per call of one batch of ``per_batch`` calls, taking ``calls`` in turn, between CUDA events."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # The GPU waits here while the host queues the batch, so the events time the kernels back to
    # back and not the host's launch cost (measured apart, as host overhead).
    torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
    start.record()
    for i in range(per_batch):
        calls[i % len(calls)]()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / per_batch


def tbps(nbytes: int, ms: float) -> float:
    """Terabytes per second of ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e12


def copy_tbps(nbytes: int = 2**30, rotate: bool = False) -> float:
    """Device-to-device copy bandwidth in TB/s, counting bytes read plus bytes written (``rotate``: over
    rotating buffer pairs, for sizes the L2 cache could otherwise serve)."""
    import torch

    def pair():
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
        return src, torch.empty_like(src)

    pairs = rotating_sets(pair, 2 * nbytes) if rotate else [pair()]
    ms = median_ms([lambda p=p: p[1].copy_(p[0]) for p in pairs], min_batch_calls=10)
    return tbps(2 * nbytes, ms)


def rotating_sets(make, bytes_per_set: int, min_total_bytes: int = 512 * 2**20, max_sets: int = 8) -> list:
    """Enough independent input sets (from ``make()``) that cycling them defeats the L2 cache."""
    count = max(2, min(max_sets, -(-min_total_bytes // max(bytes_per_set, 1))))
    return [make() for _ in range(count)]


def failure(e: Exception) -> str:
    """Why a contender was not built or timed, as a benchmark records it (its exception, briefly)."""
    return f"{type(e).__name__}: {e}"[:300]


def run_metadata(kind: str, command: str) -> dict:
    """What every benchmark and tuning file records: what ran, where, when, with which versions."""
    import datetime
    import platform

    import torch

    props = torch.cuda.get_device_properties(0)
    return {"benchmark": kind, "device": props.name, "arch": f"sm_{props.major}{props.minor}",
            "date": datetime.date.today().isoformat(), "command": command,
            "versions": {"torch": torch.__version__, "python": platform.python_version(), "cuda": torch.version.cuda}}
