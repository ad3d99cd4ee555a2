"""`cukiln bench overhead`'s timing order, on the CPU (the paths replaced by stubs that log their calls): every
path that compiles nothing is warmed and timed before any compiled path runs at all."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cukiln.tools import overhead  # noqa: E402


def test_eager_paths_are_timed_before_anything_compiles(monkeypatch):
    names = ("torch: y.add_(1.0)", "torch.compile(fullgraph) of y.add_(1.0)", "cukiln.rope (in place, base)",
             "torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)", "CUDA graph replay of cukiln.rope",
             "floor: torch.compile(fullgraph) of that op", "op cukiln::rope_ through the dispatcher (in place)")
    calls = []
    paths = {name: (lambda name=name: calls.append(name)) for name in names}
    monkeypatch.setattr(overhead, "_paths", lambda only=None: paths)
    monkeypatch.setattr(overhead, "per_call_us", lambda fn, count: (fn(), 2.0)[1])
    monkeypatch.setattr(overhead, "submit_us", lambda fn: 1.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    rounds = []
    result = overhead.measure(rounds=3, calls=1, advance=lambda: rounds.append(len(calls)))
    first_compiled = next(i for i, name in enumerate(calls) if overhead.compiles(name))
    eager = [name for name in names if not overhead.compiles(name)]
    assert not any(overhead.compiles(name) for name in calls[:first_compiled])
    assert all(calls[:first_compiled].count(name) == 200 + 3 for name in eager), "warmed, then timed 3 rounds"
    assert len(rounds) == 6, "a round of each phase advances the progress"
    assert set(result) == set(names) and all(f["rounds_us"] == [2.0] * 3 for f in result.values())
    assert result["CUDA graph replay of cukiln.rope"]["submit_us"] == 1.0
    reduce = result["torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)"]
    assert reduce["cuda_graph"] is True and reduce["cuda_graph_skipped"] == []
