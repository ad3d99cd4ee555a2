"""The per-call discipline every op shares: validated plans cached by call metadata, pointers refilled per call.

A call's key holds everything its plan depends on except pointer values: shapes, strides, dtypes, devices,
pointer alignment and scalar arguments. A hit takes the cached plan's parameter values, writes this call's
pointers into their slots, rechecks what depends on pointer values (an output overlapping an input) and
launches the kernels bound at the first launch. A miss runs the op's full validation and planning.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Refill:
    """Where a call's pointers go in a plan's parameter values, and which of them the written tensor must not
    overlap. Pointers are listed by the op in a fixed order (its tensor arguments); index ``written`` is the
    output's."""

    slots: tuple[tuple[int, int], ...]  # (index in the parameter values, index in the call's pointers)
    spans: tuple[tuple[int, int] | None, ...]  # per pointer: the tensor's byte extent relative to it
    checks: tuple[int, ...] = ()  # pointers (indices) whose tensors are rechecked against the written one
    written: int = 1

    def values(self, template: tuple, pointers) -> list:
        """``template`` (a plan's parameter values) with this call's pointers written into their slots."""
        values = list(template)
        for slot, arg in self.slots:
            values[slot] = pointers[arg]
        return values

    def overlapping(self, pointers) -> int | None:
        """The first checked pointer whose tensor overlaps the written tensor at this call's addresses, or None."""
        w = self.written
        lo_w, hi_w = pointers[w] + self.spans[w][0], pointers[w] + self.spans[w][1]
        for i in self.checks:
            lo, hi = pointers[i] + self.spans[i][0], pointers[i] + self.spans[i][1]
            if lo_w < hi and lo < hi_w:
                return i
        return None


def slots_for(field_names: tuple[str, ...], pointer_fields: tuple[str | None, ...]) -> tuple[tuple[int, int], ...]:
    """(index in ``field_names``, index in ``pointer_fields``) for every pointer the struct has a field for."""
    return tuple((field_names.index(f), i) for i, f in enumerate(pointer_fields) if f is not None and f in field_names)
