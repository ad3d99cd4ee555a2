"""A bounded cache of validated plans keyed by call metadata: each op's one plan cache (runtime/calls.py says what a
plan is and what its key holds)."""

from __future__ import annotations

ALIGN_MASK = 15  # vector widths depend on pointer alignment up to 16 bytes


class PlanCache:
    """Validated plans of one op keyed by call metadata: the op's only per-call state (bounded)."""

    MAX_ENTRIES = 4096

    def __init__(self) -> None:
        self._plans: dict[tuple, object] = {}

    def get(self, key):
        return self._plans.get(key)

    def put(self, key, value) -> None:
        if len(self._plans) >= self.MAX_ENTRIES:
            self._plans.clear()
        self._plans[key] = value

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)
