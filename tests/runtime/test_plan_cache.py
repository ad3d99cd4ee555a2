"""The per-call mechanism every op shares: a plan cache bounded in size, and the refill of pointers into a
plan's parameter values with the overlap check that depends on them."""

from __future__ import annotations

from cukiln.plan_cache import PlanCache, Refill, slots_for


def test_the_cache_is_bounded_and_clears_when_full():
    cache = PlanCache()
    for i in range(PlanCache.MAX_ENTRIES):
        cache.put(i, i)
    assert len(cache) == PlanCache.MAX_ENTRIES and cache.get(7) == 7
    cache.put("one more", 1)
    assert len(cache) == 1 and cache.get(7) is None


def test_refill_writes_each_pointer_into_its_field_and_finds_overlaps():
    fields = ("x", "n", "out", "table")
    refill = Refill(slots_for(fields, ("x", "out", "table", None)), spans=((0, 64), (0, 64), (0, 16), None),
                    checks=(0, 2), written=(1,))
    assert refill.slots == ((0, 0, 0), (2, 1, 0), (3, 2, 0))
    assert refill.values((0, 5, 0, 0), [1000, 2000, 3000]) == [1000, 5, 2000, 3000]
    assert refill.overlapping([1000, 2000, 3000]) is None
    assert refill.overlapping([1000, 1032, 3000]) == (1, 0)  # out's bytes reach into x's
    assert refill.overlapping([1000, 2000, 2060]) == (1, 2)  # the table starts inside out


def test_a_slot_may_add_a_byte_offset_to_its_pointer():
    refill = Refill(((0, 0, 0), (1, 0, 64)), spans=((0, 128),))
    assert refill.values((0, 0), [1000]) == [1000, 1064]  # a packed cos|sin cache: sin half 64 bytes in


def test_pointers_found_apart_are_remembered_and_new_ones_checked_again():
    refill = Refill(((0, 0, 0), (1, 1, 0)), spans=((0, 64), (0, 64), (0, 64)), checks=(0,), written=(1,))
    assert refill.involved == (0, 1)  # pointer 2 takes part in no pair
    assert refill.overlapping([1000, 2000, 5]) is None and refill.apart == (1000, 2000)
    assert refill.overlapping([1000, 2000, 1032]) is None  # a pointer outside every pair changed: still apart
    assert refill.overlapping([1000, 1032, 5]) == (1, 0)  # new pointers: checked, refused
    assert refill.apart == (1000, 2000), "a refused call is not remembered"
    assert refill.overlapping([1000, 2000, 5]) is None
