"""medians_ms takes its candidates' batches in turn, round by round (no GPU: the batch timer is a stub)."""

from __future__ import annotations

from cukiln.tools import timing


def test_candidates_are_timed_in_turn_so_a_drift_falls_on_all_alike(monkeypatch):
    order, clock = [], [0.0]

    def batch_ms(calls, per_batch):  # a host that slows down by 1 ms per batch, whatever it times
        order.append(calls[0]())
        clock[0] += 1.0
        return clock[0] + {"a": 0.0, "b": 0.5}[calls[0]()]

    monkeypatch.setattr(timing, "_warm", lambda calls, warmup: None)
    monkeypatch.setattr(timing, "_batch_ms", batch_ms)
    medians = timing.medians_ms({"a": [lambda: "a"], "b": [lambda: "b"]}, batches=5)
    assert order == ["a", "b"] * 5
    # a's batches at 1, 3, 5, 7, 9 ms and b's at 2.5, 4.5, ...: b's own 0.5 ms extra shows through the drift as
    # 1.5 ms (one batch later each round), where timing a's batches all before b's would have shown 5.5
    assert medians == {"a": 5.0, "b": 6.5}
