"""A bounded cache of validated plans keyed by call metadata: each op's one plan cache (runtime/calls.py says what a
plan is and what its key holds)."""

from __future__ import annotations

ALIGN_MASK = 15  # vector widths depend on pointer alignment up to 16 bytes


class PlanCache(dict):
    """Validated plans of one op keyed by call metadata: the op's only per-call state (bounded)."""

    MAX_ENTRIES = 4096

    def put(self, key, value) -> None:
        if len(self) >= self.MAX_ENTRIES:
            self.clear()
        self[key] = value
