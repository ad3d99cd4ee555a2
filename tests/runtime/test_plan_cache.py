"""The per-call mechanism every op shares (runtime/calls.py): a plan cache bounded in size, and a plan's refill of
this call's pointers into its parameter values, with the overlap check that depends on them."""

from __future__ import annotations

import types

from cukiln.calls import ARGUMENT, OUTPUT, SCRATCH, Launch, Plan
from cukiln.plan_cache import PlanCache


def test_the_cache_is_bounded_and_clears_when_full():
    cache = PlanCache()
    for i in range(PlanCache.MAX_ENTRIES):
        cache.put(i, i)
    assert len(cache) == PlanCache.MAX_ENTRIES and cache.get(7) == 7
    cache.put("one more", 1)
    assert len(cache) == 1 and cache.get(7) is None


def _tensor(ptr: int):
    return types.SimpleNamespace(data_ptr=lambda: ptr)


def test_a_launch_writes_each_pointer_and_int_into_its_field():
    # fields: x, n, out, table, a length; the table's sin half 64 bytes in (a packed cos|sin cache)
    launch = Launch(None, [0, 5, 0, 64, 0], [(0, ARGUMENT, 0, 0), (2, OUTPUT, 0, 0), (3, ARGUMENT, 1, 64),
                                             (1, SCRATCH, 0, 8)], [(4, 2)])
    values = launch.values([_tensor(1000), _tensor(3000), 17], [_tensor(2000)], [7000])
    assert values == [1000, 7008, 2000, 3064, 17]


def _plan(overlaps) -> Plan:
    return Plan(0, [], overlaps=overlaps)


def test_a_plan_finds_overlaps_between_what_it_writes_and_reads():
    # argument 1 (written, 64 bytes) against arguments 0 and 2 (read: 64 and 16 bytes)
    plan = _plan([(1, 0, 0, 64, 0, 64, None), (1, 2, 0, 64, 0, 16, None)])
    assert plan.overlapping([_tensor(1000), _tensor(2000), _tensor(3000)]) is None
    assert plan.overlapping([_tensor(1000), _tensor(1032), _tensor(3000)]) == (1, 0)  # out's bytes reach into x's
    assert plan.overlapping([_tensor(1000), _tensor(2000), _tensor(2060)]) == (1, 2)  # the table starts inside out
    assert plan.checked and not _plan([]).checked


def test_pointers_found_apart_are_remembered_and_new_ones_checked_again():
    plan = _plan([(1, 0, 0, 64, 0, 64, None)])
    assert plan.involved == (0, 1)  # argument 2 takes part in no pair
    assert plan.overlapping([_tensor(1000), _tensor(2000), _tensor(5)]) is None and plan.apart == (1000, 2000)
    assert plan.overlapping([_tensor(1000), _tensor(2000), _tensor(1032)]) is None  # outside every pair: apart
    assert plan.overlapping([_tensor(1000), _tensor(1032), _tensor(5)]) == (1, 0)  # new pointers: checked, refused
    assert plan.apart == (1000, 2000), "a refused call is not remembered"
    assert plan.overlapping([_tensor(1000), _tensor(2000), _tensor(5)]) is None
