"""The per-call discipline every op shares: validated plans cached by call metadata, pointers refilled per call.

A call's key holds everything its plan depends on except pointer values: shapes, strides, dtypes, devices,
pointer alignment and scalar arguments. A hit takes the cached plan's parameter values, writes this call's
pointers into their slots, rechecks what depends on pointer values (an output overlapping an input) and
launches the kernels bound at the first launch. A miss runs the op's full validation and planning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def add_tensors(key: list, pointers: list, tensors) -> None:
    """Append each of ``tensors`` to a call's key (its metadata: shape, strides, dtype, conjugation, device, pointer
    alignment; None and ints as themselves) and its pointer (0 for None and ints) to the call's pointers. Runs on
    every call: a tensor argument that is not a torch tensor raises AttributeError (the caller plans in full)."""
    for t in tensors:
        if t is None or type(t) is int:
            key.append(t)
            pointers.append(0)
        else:
            ptr = t.data_ptr()
            key.append((t.shape, t.stride(), t.dtype, t.is_neg(), t.get_device(), ptr & ALIGN_MASK))
            pointers.append(ptr)


@dataclass(frozen=True)
class Refill:
    """Where a call's pointers go in a plan's parameter values, and which of them the written tensors must not
    overlap. Pointers are listed by the op in a fixed order (its tensor arguments); ``written`` are the outputs'
    indices."""

    # (index in the parameter values, index in the call's pointers, bytes added to the pointer)
    slots: tuple[tuple[int, int, int], ...]
    spans: tuple[tuple[int, int] | None, ...]  # per pointer: the tensor's byte extent relative to it
    checks: tuple[int, ...] = ()  # pointers (indices) whose tensors are rechecked against each written one
    written: tuple[int, ...] = (1,)
    # (written, checked) -> the tensors.Interleaving of a pair whose byte spans may meet without their bytes
    # meeting (q and k slices of one fused projection): apart while their pointers' distance stays in its window
    windows: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The (written, checked) pairs flattened once with their spans and window: the hit path walks this list
        pairs = tuple((w, i, self.spans[w][0], self.spans[w][1], self.spans[i][0], self.spans[i][1],
                       self.windows.get((w, i))) for w in self.written for i in self.checks if i != w)
        object.__setattr__(self, "pairs", pairs)
        # the pointers the pairs read, and the last such pointers found apart: a caller passing the same tensors
        # call after call (a decode loop, a layer's projections) skips the walk
        object.__setattr__(self, "involved", tuple(sorted({i for pair in pairs for i in pair[:2]})))
        object.__setattr__(self, "apart", None)

    def values(self, template: tuple, pointers) -> list:
        """``template`` (a plan's parameter values) with this call's pointers written into their slots."""
        values = list(template)
        for slot, arg, add in self.slots:
            values[slot] = pointers[arg] + add
        return values

    def overlapping(self, pointers) -> tuple[int, int] | None:
        """(written, checked) indices of the first pair whose tensors overlap at this call's addresses, or None.
        The answer depends on the involved pointers alone (the spans are the plan's): the last ones found apart
        are remembered (only pointers that passed are, so a thread never skips a check another did not make)."""
        involved = tuple([pointers[i] for i in self.involved])
        if involved == self.apart:
            return None
        for w, i, w_lo, w_hi, i_lo, i_hi, window in self.pairs:
            pw, pi = pointers[w], pointers[i]
            if pw + w_lo < pi + i_hi and pi + i_lo < pw + w_hi and (window is None or not window.apart(pi - pw)):
                return w, i
        object.__setattr__(self, "apart", involved)
        return None


def slots_for(field_names: tuple[str, ...], pointer_fields: tuple[str | None, ...]) -> tuple[tuple[int, int, int], ...]:
    """(index in ``field_names``, index in ``pointer_fields``, 0) for every pointer the struct has a field for."""
    return tuple((field_names.index(f), i, 0) for i, f in enumerate(pointer_fields)
                 if f is not None and f in field_names)
