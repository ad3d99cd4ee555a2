"""Paged KV caches written on the CPU: the float64 kv_append and decode_step write pools through a block table (or a
flat slot mapping) exactly where the fixed-capacity caches holding the same keys are written, leave every other
slot as it was, skip negative slots, and refuse a bad table or slot mapping naming the argument."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln.tools.decode.checks import paged_copy  # noqa: E402

B, H_KV, GROUP, T, D, N = 3, 2, 2, 40, 64, 2


def _inputs(layout="bhsd", seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, N, H_KV * GROUP, D, generator=gen).to(torch.bfloat16)
    k_new, v_new = (torch.randn(B, N, H_KV, D, generator=gen).to(torch.bfloat16) for _ in range(2))
    shape = (B, H_KV, T, D) if layout == "bhsd" else (B, T, H_KV, D)
    k, v = (torch.randn(shape, generator=gen).to(torch.bfloat16) for _ in range(2))
    return q, k_new, v_new, k, v, gen


def _unpage(pool, table, layout, page_size):
    """The fixed-capacity view of a pool: row i = its pages in table order ([b, h, T, d] or [b, T, h, d])."""
    hnd = pool if layout == "bhsd" else pool.transpose(1, 2)
    rows = hnd[table.long()].transpose(1, 2).flatten(2, 3)  # [b, h, pages x page_size, d]
    return rows if layout == "bhsd" else rows.transpose(1, 2)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("page_size", [1, 8, 64])
def test_the_append_writes_pages_where_the_fixed_cache_is_written(layout, page_size):
    q, k_new, v_new, k, v, gen = _inputs(layout)
    (kp, vp), table = paged_copy((k, v), page_size, layout=layout, gen=gen)
    lens = torch.tensor([0, 17, T - N], dtype=torch.int32)
    kp0, vp0 = kp.clone(), vp.clone()
    want = cukiln.reference.kv_append(q, k_new, v_new, k, v, lens, kv_layout=layout, base=10000.0)
    got = cukiln.reference.kv_append(q, k_new, v_new, kp, vp, lens, kv_layout=layout, base=10000.0,
                                     block_table=table)
    assert torch.equal(got, want)
    width = table.shape[1] * page_size
    for pool, fixed in ((kp, k), (vp, v)):
        assert torch.equal(_unpage(pool, table, layout, page_size).narrow(2 if layout == "bhsd" else 1, 0, T), fixed)
    used = torch.zeros(kp.shape[0], dtype=torch.bool)
    used[table.long().flatten()] = True
    assert torch.equal(kp[~used], kp0[~used]) and torch.equal(vp[~used], vp0[~used])  # the spare pages untouched
    assert width >= T


def test_a_slot_mapping_writes_flat_slots_and_skips_negative_ones():
    q, k_new, v_new, k, v, gen = _inputs()
    (kp, vp), table = paged_copy((k, v), 16, gen=gen)
    lens = torch.tensor([3, 20, 33], dtype=torch.int32)
    slots = (table.long().gather(1, ((lens[:, None] + torch.arange(N)) // 16).long()) * 16
             + (lens[:, None] + torch.arange(N)) % 16).flatten()
    slots[3] = -1  # row 1's second token: padding
    kp_table, vp_table = kp.clone(), vp.clone()
    before = kp.clone()
    want = cukiln.reference.kv_append(q, k_new, v_new, kp_table, vp_table, lens, base=10000.0, block_table=table)
    got = cukiln.reference.kv_append(q, k_new, v_new, kp, vp, lens, base=10000.0, slot_mapping=slots)
    assert torch.equal(got, want)  # the rotated query does not depend on where the keys go
    skipped = int(table[1, (20 + 1) // 16]), (20 + 1) % 16
    assert torch.equal(kp[skipped[0], :, skipped[1]], before[skipped[0], :, skipped[1]])
    kp_table[skipped[0], :, skipped[1]] = before[skipped[0], :, skipped[1]]
    vp_table[skipped[0], :, skipped[1]] = vp[skipped[0], :, skipped[1]]
    assert torch.equal(kp, kp_table) and torch.equal(vp, vp_table)


def test_a_paged_step_is_the_append_then_the_paged_attention():
    q, k_new, v_new, k, v, gen = _inputs()
    q, k_new, v_new = q[:, 0], k_new[:, 0], v_new[:, 0]
    (kp, vp), table = paged_copy((k, v), 8, gen=gen)
    lens = torch.tensor([0, 9, T - 1], dtype=torch.int32)
    want = cukiln.reference.decode_step(q, k_new, v_new, k, v, lens.clone(), base=10000.0)
    got = cukiln.reference.decode_step(q, k_new, v_new, kp, vp, lens.clone(), base=10000.0, block_table=table)
    assert torch.equal(got, want)


@pytest.mark.parametrize("given, error, words", [
    ({"slot_mapping": torch.zeros(B * N, dtype=torch.int32)}, TypeError, "slot_mapping: expected (an )?int64"),
    ({"slot_mapping": torch.zeros(B * N + 1, dtype=torch.int64)}, ValueError, "slot_mapping: expected a contiguous"),
    ({"slot_mapping": torch.zeros(B * N, dtype=torch.int64), "block_table": torch.zeros(B, 4, dtype=torch.int32)},
     ValueError, "slot_mapping: give a block_table or a slot_mapping, not both"),
    ({"block_table": torch.zeros(B, 4, dtype=torch.float32)}, TypeError, "block_table: expected"),
    ({"block_table": torch.zeros(B + 1, 4, dtype=torch.int32)}, ValueError, "block_table: expected shape"),
    ({"block_table": torch.zeros(B, 1, dtype=torch.int32)}, ValueError, "kv_lens: row 2 holds"),
])
def test_bad_paged_appends_are_refused_naming_the_argument_and_nothing_is_written(given, error, words):
    q, k_new, v_new, k, v, gen = _inputs()
    (kp, vp), _ = paged_copy((k, v), 16, gen=gen)
    kp0, vp0, q0 = kp.clone(), vp.clone(), q.clone()
    with pytest.raises(error, match=words):
        cukiln.reference.kv_append(q, k_new, v_new, kp, vp, torch.tensor([0, 4, 30], dtype=torch.int32),
                                   base=10000.0, inplace=True, **given)
    assert torch.equal(kp, kp0) and torch.equal(vp, vp0) and torch.equal(q, q0)


def test_a_table_or_slot_mapping_on_the_host_is_checked_before_anything_is_written():
    q, k_new, v_new, k, v, gen = _inputs()
    (kp, vp), table = paged_copy((k, v), 16, gen=gen, width=4)
    lens = torch.tensor([0, 4, 30], dtype=torch.int32)
    kp0 = kp.clone()
    bad = table.clone()
    bad[2, 1] = kp.shape[0]  # row 2 writes slots 30-31: its second page
    with pytest.raises(ValueError, match=r"block_table: row 2's page 1 is .* outside the pool"):
        cukiln.reference.kv_append(q, k_new, v_new, kp, vp, lens, base=10000.0, block_table=bad)
    bad = table.clone()
    bad[0, 3] = -7  # a page no row touches: not checked
    cukiln.reference.kv_append(q, k_new, v_new, kp.clone(), vp.clone(), lens, base=10000.0, block_table=bad)
    with pytest.raises(ValueError, match=r"slot_mapping: new token 1's slot -2 is outside"):
        cukiln.reference.kv_append(q, k_new, v_new, kp, vp, lens, base=10000.0,
                                   slot_mapping=torch.tensor([0, -2, 3, 4, 5, 6]))
    with pytest.raises(ValueError, match=r"block_table: row 1's page 0"):
        bad = table.clone()
        bad[1, 0] = 10 ** 6
        cukiln.reference.decode_attention(q[:, 0], kp, vp, lens + 2, block_table=bad)
    assert torch.equal(kp, kp0)
