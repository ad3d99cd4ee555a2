"""Paged KV caches on the GPU: decode over pools of pages in shuffled order against the float64 reference (NaN-poisoned
outputs, the pools unchanged), the append through a block table or a slot mapping (every slot it does not write
bit-identical after the call), the paged step, a table entry outside the pool, and CUDA-graph replay and
torch.compile with the table."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import cukiln  # noqa: E402
from cukiln.tools.decode.checks import check_lse, decode_cache_view, paged_copy  # noqa: E402
from cukiln.tools.verify import compare  # noqa: E402

H_KV, GROUP, D = 2, 4, 128
FP8_WRITES = torch.cuda.get_device_capability() >= (8, 9)


def _caches(b, T, dtype, gen, layout="bhsd"):
    return tuple(decode_cache_view(b, H_KV, T, D, dtype, gen, layout=layout, capacity=T) for _ in range(2))


@pytest.mark.parametrize("page_size", [1, 16, 64, 256])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("cache", ["bf16", "fp8"])
@pytest.mark.parametrize("num_splits", [None, 1, 5, 20])
def test_paged_decode_matches_the_reference(page_size, layout, cache, num_splits):
    gen = torch.Generator("cuda").manual_seed(page_size + num_splits if num_splits else page_size)
    b, T = 4, 700
    dtype = torch.float8_e4m3fn if cache == "fp8" else torch.bfloat16
    k, v = _caches(b, T, dtype, gen, layout)
    (kp, vp), table = paged_copy((k, v), page_size, layout=layout, gen=gen, width=-(-T // page_size) + 1)
    before = (kp.clone(), vp.clone())
    q = torch.randn(b, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    lens = torch.tensor([T, 1, 333, 0], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 0, 17, 0], dtype=torch.int32, device="cuda")
    scales = {"k_scale": torch.tensor([2.0 ** -7, 2.0 ** -6], device="cuda"), "v_scale": 0.5} if cache == "fp8" else {}
    out = torch.full_like(q, float("nan"))
    got, lse = cukiln.decode_attention(q, kp, vp, lens, kv_layout=layout, kv_start=start, block_table=table, out=out,
                                       return_lse=True, num_splits=num_splits, **scales)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, kv_layout=layout, kv_start=start,
                                                     return_lse=True, **scales)
    assert got is out
    assert compare(out, ref, fp32_units=64) is None and check_lse(lse, ref_lse) is None
    assert torch.equal(kp.view(torch.uint8), before[0].view(torch.uint8))
    assert torch.equal(vp.view(torch.uint8), before[1].view(torch.uint8))
    if num_splits is None:  # the same bits as the fixed-capacity kernel over the same keys (same tiles, same order)
        fixed = cukiln.decode_attention(q, k, v, lens, kv_layout=layout, kv_start=start, num_splits=1, **scales)
        paged = cukiln.decode_attention(q, kp, vp, lens, kv_layout=layout, kv_start=start, block_table=table,
                                        num_splits=1, **scales)
        assert torch.equal(paged, fixed)


def test_a_table_entry_outside_the_pool_makes_only_its_row_nan():
    gen = torch.Generator("cuda").manual_seed(1)
    k, v = _caches(3, 256, torch.bfloat16, gen)
    (kp, vp), table = paged_copy((k, v), 16, gen=gen)
    table[0, 3] = kp.shape[0]
    table[1, 15] = -5
    q = torch.randn(3, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    lens = torch.tensor([256, 256, 200], dtype=torch.int32, device="cuda")
    for splits in (1, 4, 20):
        out, lse = cukiln.decode_attention(q, kp, vp, lens, block_table=table, return_lse=True, num_splits=splits)
        assert out[:2].isnan().all() and lse[:2].isnan().all(), splits
        assert not out[2].isnan().any() and not lse[2].isnan().any(), splits


@pytest.mark.parametrize("form", ["table", "slots"])
@pytest.mark.parametrize("cache", ["bf16", "fp8"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_paged_append_writes_its_slots_and_nothing_else(form, cache, page_size):
    if cache == "fp8" and not FP8_WRITES:
        pytest.skip("FP8 caches are written from sm_89 on")
    gen = torch.Generator("cuda").manual_seed(7)
    b, n, T = 3, 3, 64
    dtype = torch.float8_e4m3fn if cache == "fp8" else torch.bfloat16
    k, v = _caches(b, T, dtype, gen)
    (kp, vp), table = paged_copy((k, v), page_size, gen=gen)
    q = torch.randn(b, n, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    k_new, v_new = (torch.randn(b, n, H_KV, D, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([0, 30, T - n], dtype=torch.int32, device="cuda")
    scales = {"k_scale": 0.25, "v_scale": torch.tensor([0.5, 2.0], device="cuda")} if cache == "fp8" else {}
    pos = lens.long()[:, None] + torch.arange(n, device="cuda")
    where = {"block_table": table}
    if form == "slots":
        slots = (table.long().gather(1, pos // page_size) * page_size + pos % page_size).flatten()
        slots[4] = -1  # padding: row 1's second token is not stored
        where = {"slot_mapping": slots}
    want_k, want_v = kp.clone(), vp.clone()
    want = cukiln.reference.kv_append(q, k_new, v_new, want_k, want_v, lens, base=10000.0, **where, **scales)
    out = torch.full_like(q, float("nan"))
    got = cukiln.kv_append(q, k_new, v_new, kp, vp, lens, base=10000.0, out=out, **where, **scales)
    assert compare(got, want) is None
    written = torch.zeros(kp.shape[0], kp.shape[2], dtype=torch.bool, device="cuda")  # (page, slot)
    written[table.long().gather(1, pos // page_size).flatten(), (pos % page_size).flatten()] = True
    if form == "slots":
        written[int(table[1, pos[1, 1] // page_size]), int(pos[1, 1] % page_size)] = False
    for pool, want_pool in ((kp, want_k), (vp, want_v)):
        raw, want_raw = pool.view(torch.uint8).transpose(1, 2), want_pool.view(torch.uint8).transpose(1, 2)
        assert torch.equal(raw[~written], want_raw[~written])  # every slot not written: bit-identical
        if cache == "bf16":
            # the kernel rotates in fp32, the reference in float64: each stored bf16 within compare's ulps of its
            assert compare(pool.transpose(1, 2)[written], want_pool.transpose(1, 2)[written].double()) is None
        else:  # one e4m3 step at most (fp32 rotation against float64)
            diff = (pool.transpose(1, 2)[written].float() - want_pool.transpose(1, 2)[written].float()).abs()
            assert (diff <= want_pool.transpose(1, 2)[written].float().abs() / 8 + 2.0 ** -9).all()


def test_a_device_table_entry_outside_the_pool_writes_nothing_for_its_tokens():
    gen = torch.Generator("cuda").manual_seed(3)
    k, v = _caches(2, 64, torch.bfloat16, gen)
    (kp, vp), table = paged_copy((k, v), 16, gen=gen)
    table[0, 0] = 10 ** 6
    before = kp.clone()
    q = torch.randn(2, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    k_new, v_new = (torch.randn(2, H_KV, D, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([3, 3], dtype=torch.int32, device="cuda")
    got = cukiln.kv_append(q, k_new, v_new, kp, vp, lens, base=10000.0, block_table=table)
    assert not got.isnan().any()  # the rows' queries are rotated all the same
    changed = (kp != before).any(dim=(1, 3)).nonzero().tolist()
    assert changed == [[int(table[1, 0]), 3]]  # row 1's token alone was stored


@pytest.mark.parametrize("cache", ["bf16", "fp8"])
def test_the_paged_step_matches_the_reference_and_replays_in_a_graph(cache):
    if cache == "fp8" and not FP8_WRITES:
        pytest.skip("FP8 caches are written from sm_89 on")
    gen = torch.Generator("cuda").manual_seed(5)
    b, T = 3, 512
    dtype = torch.float8_e4m3fn if cache == "fp8" else torch.bfloat16
    k, v = _caches(b, T, dtype, gen)
    (kp, vp), table = paged_copy((k, v), 16, gen=gen)
    scales = {"k_scale": 2.0 ** -6, "v_scale": 0.5} if cache == "fp8" else {}
    q = torch.randn(b, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    k_new, v_new = (torch.randn(b, H_KV, D, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([5, 200, 300], dtype=torch.int32, device="cuda")
    ref_k, ref_v = kp.clone(), vp.clone()
    want = cukiln.reference.decode_step(q, k_new, v_new, ref_k, ref_v, lens.clone(), base=10000.0, block_table=table,
                                        **scales)
    step_lens = lens.clone()
    graph = torch.cuda.CUDAGraph()
    out = torch.empty_like(q)
    cukiln.decode_step(q, k_new, v_new, kp.clone(), vp.clone(), step_lens.clone(), base=10000.0, block_table=table,
                       out=out, **scales)  # warm-up (planned outside the capture)
    with torch.cuda.graph(graph):
        cukiln.decode_step(q, k_new, v_new, kp, vp, step_lens, base=10000.0, block_table=table, out=out,
                           advance_lens=True, **scales)
    graph.replay()
    assert compare(out, want) is None and torch.equal(step_lens, lens + 1)
    graph.replay()  # the next step: a second token appended after the first
    assert torch.equal(step_lens, lens + 2)


def test_torch_compile_fullgraph_takes_the_block_table():
    gen = torch.Generator("cuda").manual_seed(9)
    k, v = _caches(2, 256, torch.bfloat16, gen)
    (kp, vp), table = paged_copy((k, v), 16, gen=gen)
    q = torch.randn(2, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    lens = torch.tensor([256, 100], dtype=torch.int32, device="cuda")
    f = torch.compile(lambda q, kp, vp, lens, table: cukiln.torch.decode_attention(q, kp, vp, lens,
                                                                                 block_table=table) * 2,
                      fullgraph=True)
    got = f(q, kp, vp, lens, table)
    assert compare(got, 2 * cukiln.reference.decode_attention(q, k, v, lens)) is None
