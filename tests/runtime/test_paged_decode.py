"""Paged KV caches on the CPU: the float64 reference reads pools of pages through a block table exactly as it reads the
fixed-capacity caches holding the same keys, a table given on the host is checked where the rows read it, the planner
picks the paged kernels and refuses a bad table or pool naming the argument."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln.decode_plan import plan_decode  # noqa: E402
from cukiln.tensors import TensorInfo  # noqa: E402
from cukiln.tools.decode.checks import paged_copy  # noqa: E402

B, H_KV, GROUP, T, D = 3, 2, 4, 50, 64


def _inputs(layout: str, dtype=torch.bfloat16, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H_KV * GROUP, D, generator=gen).to(torch.bfloat16)
    shape = (B, H_KV, T, D) if layout == "bhsd" else (B, T, H_KV, D)
    k, v = (torch.randn(shape, generator=gen).to(dtype) for _ in range(2))
    return q, k, v, gen


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("fp8", [False, True])
def test_reference_reads_pages_as_the_fixed_cache_holding_the_same_keys(layout, page_size, fp8):
    q, k, v, gen = _inputs(layout, torch.float8_e4m3fn if fp8 else torch.bfloat16)
    (kp, vp), table = paged_copy((k, v), page_size, layout=layout, gen=gen, width=-(-T // page_size) + 2)
    assert not torch.equal(table[:, :2].flatten().sort().values, table[:, :2].flatten())  # a shuffled table
    lens, start = torch.tensor([T, 1, 33], dtype=torch.int32), torch.tensor([0, 0, 7], dtype=torch.int32)
    scales = {"k_scale": 0.5, "v_scale": torch.tensor([2.0, 0.25])} if fp8 else {}
    want, want_lse = cukiln.reference.decode_attention(q, k, v, lens, kv_layout=layout, kv_start=start,
                                                       return_lse=True, **scales)
    got, lse = cukiln.reference.decode_attention(q, kp, vp, lens, kv_layout=layout, kv_start=start,
                                                 block_table=table, return_lse=True, **scales)
    assert torch.equal(got, want) and torch.equal(lse, want_lse)


def test_a_page_outside_the_pool_on_the_host_is_refused_and_one_no_key_falls_in_is_not_read():
    # (on the device, where the table's values are not read back, such a row gives NaN: the GPU tests)
    q, k, v, gen = _inputs("bhsd")
    (kp, vp), table = paged_copy((k, v), 16, gen=gen)
    lens = torch.tensor([T, T, 20], dtype=torch.int32)
    table[2, 3] = 10 ** 6  # a page row 2 never reads (its 20 keys take two)
    cukiln.reference.decode_attention(q, kp, vp, lens, block_table=table)
    table[1, 3] = -1
    with pytest.raises(ValueError, match=r"block_table: row 1's page 3 is -1, outside the pool"):
        cukiln.reference.decode_attention(q, kp, vp, lens, block_table=table)


BASE = 1 << 20


def _info(shape, dtype="bf16", ptr=BASE, strides=None):
    if strides is None:
        strides, n = [], 1
        for size in reversed(shape):
            strides.append(n)
            n *= size
        strides = tuple(reversed(strides))
    return TensorInfo(ptr, tuple(shape), tuple(strides), dtype, 0)


def _plan(**kw):
    given = {"q": _info((4, 8, 128)), "k_cache": _info((40, 2, 16, 128)), "v_cache": _info((40, 2, 16, 128), ptr=BASE * 64),
             "kv_lens": 100, "block_table": _info((4, 10), "int32", ptr=BASE * 128)}
    given.update(kw)
    return plan_decode(given.pop("q"), given.pop("k_cache"), given.pop("v_cache"), given.pop("kv_lens"), **given)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_the_planner_picks_the_paged_kernel_and_fills_the_table_fields(layout):
    shape = (40, 2, 16, 128) if layout == "bhsd" else (40, 16, 2, 128)
    p = _plan(k_cache=_info(shape), v_cache=_info(shape, ptr=BASE * 64), kv_layout=layout, num_splits=1)
    assert p.attention.symbol == "decode_bf16_d128_s3_v8_paged" and p.key[-1] == "paged"
    f = p.fields
    assert (f["capacity"], f["page_shift"], f["num_pages"], f["table_sb"]) == (160, 4, 40, 10)
    assert f["k_sb"] == 2 * 16 * 128 and f["k_st"] == (128 if layout == "bhsd" else 2 * 128)
    fp8 = _plan(k_cache=_info((40, 2, 16, 128), "e4m3"), v_cache=_info((40, 2, 16, 128), "e4m3", ptr=BASE * 64))
    assert fp8.attention.symbol.endswith("_e4m3_paged")


def test_on_sm_90_a_tuned_ws_choice_takes_ws_deep_over_pages_with_its_four_producer_warps():
    from cukiln.decode_plan import stand_in
    from cukiln.generated import dispatch

    assert stand_in("ws", ("narrow", "ws_deep")) == "ws_deep" and stand_in("ws", ("narrow",)) == "narrow"
    assert stand_in("deep", ("narrow", "ws_deep")) == "narrow" and stand_in("ws", ("narrow", "ws")) == "ws"
    # b 4 x 8 KV-head rows of 2k keys: the H200's table picks ws (or ws_deep) there; the pool has ws_deep alone
    table = _info((4, 128), "int32", ptr=BASE * 128)
    pool = (512, 8, 16, 128)
    p = _plan(q=_info((4, 32, 128)), k_cache=_info(pool), v_cache=_info(pool, ptr=BASE * 64), kv_lens=2048,
              block_table=table, arch="sm_90", sms=132, tuning="sm_90-h200")
    assert p.pipeline == "ws_deep" and p.attention.symbol == "decode_bf16_d128_s3_v8_ws_deep_paged"
    assert p.attention.block == (dispatch.DECODE_PAGED_THREADS["ws_deep"], 1, 1) == (256, 1, 1)
    assert "k_map" not in p.fields  # its producers copy page by page: no tensor maps
    # the narrow pipeline where tensor maps' arch is missing (sm_80)
    assert _plan(q=_info((4, 32, 128)), k_cache=_info(pool), v_cache=_info(pool, ptr=BASE * 64), kv_lens=2048,
                 block_table=table, arch="sm_80", sms=108).pipeline == "narrow"


@pytest.mark.parametrize("given, error, words", [
    ({"block_table": _info((4, 10), "int64")}, TypeError, "block_table: expected (an )?int32"),
    ({"block_table": _info((3, 10), "int32")}, ValueError, r"block_table: expected shape \[4, max_pages\]"),
    ({"block_table": _info((4, 10), "int32", strides=(1, 4))}, ValueError, "block_table: expected its last axis"),
    ({"k_cache": _info((40, 2, 12, 128)), "v_cache": _info((40, 2, 12, 128))}, ValueError,
     "k_cache: a page size .* power of two, got 12"),
    ({"k_cache": _info((40, 2, 16, 128), ptr=BASE + 2)}, ValueError, "k_cache: a paged pool needs"),
    ({"v_cache": _info((40, 2, 16, 128), strides=(2 * 16 * 132, 16 * 132, 132, 1))}, ValueError,
     "v_cache: a paged pool needs"),
    ({"k_cache": _info((40, 2, 16, 64)), "v_cache": _info((40, 2, 16, 64))}, ValueError,
     "k_cache: expected head dim 128"),
    ({"kv_lens": 161}, ValueError, r"kv_lens: expected 0 <= kv_lens <= T = 160"),
    ({"k_cache": _info((40, 16, 128))}, ValueError, r"k_cache: expected a 4-d pool of pages"),
])
def test_bad_tables_and_pools_are_refused_naming_the_argument(given, error, words):
    with pytest.raises(error, match=words):
        _plan(**given)


def test_flashinfers_csr_form_becomes_a_block_table_and_lengths():
    q, k, v, gen = _inputs("bshd")
    (kp, vp), table = paged_copy((k, v), 16, layout="bshd", gen=gen)
    lens = torch.tensor([T, 1, 33], dtype=torch.int32)
    used = [-(-int(n) // 16) for n in lens]  # FlashInfer lists the pages in use alone
    indptr = torch.tensor([0, used[0], used[0] + used[1], sum(used)], dtype=torch.int32)
    indices = torch.cat([table[i, :used[i]] for i in range(B)])
    last = lens - (torch.tensor(used) - 1) * 16
    got_table, got_lens = cukiln.block_table(indptr, indices, last, 16, max_pages=table.shape[1])
    assert torch.equal(got_lens, lens) and got_table.shape == table.shape
    want = cukiln.reference.decode_attention(q, kp, vp, lens, kv_layout="bshd", block_table=table)
    got = cukiln.reference.decode_attention(q, kp, vp, got_lens, kv_layout="bshd", block_table=got_table)
    assert torch.equal(got, want)
    assert cukiln.block_table(indptr, indices, last, 16)[0].shape == (B, max(used))  # its width read back
    empty_row = cukiln.block_table(torch.tensor([0, 2, 2]), indices[:2], torch.tensor([5, 0]), 16)
    assert empty_row[1].tolist() == [21, 0]
    with pytest.raises(ValueError, match="page_size: expected a power of two"):
        cukiln.block_table(indptr, indices, last, 12)
    with pytest.raises(ValueError, match="kv_last_page_len: expected an integer tensor"):
        cukiln.block_table(indptr, indices, last[:2], 16)


def test_a_host_table_is_checked_where_rows_read_it_whatever_form_the_lengths_take():
    q, k, v, gen = _inputs("bhsd")
    (kp, vp), table = paged_copy((k, v), 16, gen=gen, width=5)
    table[:, 4] = -1  # padding no key reaches (rows of 20 keys take two pages)
    cukiln.reference.decode_attention(q, kp, vp, 20, block_table=table)  # an int length stands for every row's
    table[1, 0] = -1  # row 1 reads nothing (kv_start = kv_lens), so its first page is not touched either
    cukiln.reference.decode_attention(q, kp, vp, torch.tensor([20, 5, 20], dtype=torch.int32), block_table=table,
                                      kv_start=torch.tensor([0, 5, 0], dtype=torch.int32))
    # a row with more pages than a given width keeps its length, past the table's capacity: the ops report it
    narrow, lens = cukiln.block_table(torch.tensor([0, 3, 4]), torch.arange(4), torch.tensor([10, 4]), 16, max_pages=2)
    assert narrow.shape == (2, 2) and lens.tolist() == [42, 4] and lens[0] > narrow.shape[1] * 16


def test_flashinfers_one_tensor_pool_is_taken_as_its_two_halves():
    # FlashInfer's [pages, 2, page_size, h_kv, d] (NHD): K and V are kv[:, 0] and kv[:, 1], strided views
    q, k, v, gen = _inputs("bshd")
    (kp, vp), table = paged_copy((k, v), 16, layout="bshd", gen=gen)
    kv = torch.stack((kp, vp), dim=1)
    lens = torch.tensor([T, 1, 33], dtype=torch.int32)
    want = cukiln.reference.decode_attention(q, kp, vp, lens, kv_layout="bshd", block_table=table)
    got = cukiln.reference.decode_attention(q, kv[:, 0], kv[:, 1], lens, kv_layout="bshd", block_table=table)
    assert torch.equal(got, want)
    halves = [_info(tuple(h.shape), strides=tuple(h.stride()), ptr=BASE + h.storage_offset() * 2) for h in
              (kv[:, 0], kv[:, 1])]
    p = plan_decode(_info(tuple(q.shape)), *halves, 40, kv_layout="bshd", block_table=_info((B, 4), "int32"),
                    num_splits=1)
    assert p.attention.symbol.endswith("_paged") and p.fields["k_sb"] == 2 * 16 * H_KV * D
