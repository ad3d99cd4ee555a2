"""Several query tokens a row on the GPU: decode_attention over q [b, n, h_q, d] with ragged counts (a row of none, a
window starting inside the new tokens), fixed and paged caches, FP8, every split mode, sinks, against the float64
reference with NaN-poisoned outputs; a row whose cache lacks its new tokens (device lengths) gives NaN alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import cukiln  # noqa: E402
from cukiln.tools.decode.checks import check_lse, decode_cache_view, paged_copy  # noqa: E402
from cukiln.tools.verify import compare  # noqa: E402

B, N, H_KV, GROUP, T, D = 4, 5, 2, 4, 700, 128


@pytest.mark.parametrize("form", ["fixed", "paged", "fp8"])
@pytest.mark.parametrize("num_splits", [None, 1, 3, 20])
@pytest.mark.parametrize("sinks", [False, True])
def test_query_tokens_match_the_reference(form, num_splits, sinks):
    gen = torch.Generator("cuda").manual_seed(21)
    q = torch.randn(B, N, H_KV * GROUP, D, generator=gen, device="cuda").to(torch.bfloat16)
    dtype = torch.float8_e4m3fn if form == "fp8" else torch.bfloat16
    k, v = (decode_cache_view(B, H_KV, T, D, dtype, gen, capacity=T) for _ in range(2))
    extra = {"k_scale": 2.0 ** -7, "v_scale": 0.5} if form == "fp8" else {}
    lens = torch.tensor([T, 6, 300, 5], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 4, 100, 0], dtype=torch.int32, device="cuda")  # row 1: a window inside its new tokens
    q_lens = torch.tensor([5, 3, 1, 0], dtype=torch.int32, device="cuda")
    if sinks:
        extra["sinks"] = torch.linspace(-8.0, 8.0, H_KV * GROUP, device="cuda")
    kc, vc, paging = k, v, {}
    if form == "paged":
        (kc, vc), table = paged_copy((k, v), 16, gen=gen)
        paging = {"block_table": table}
    out = torch.full_like(q, float("nan"))
    got, lse = cukiln.decode_attention(q, kc, vc, lens, kv_start=start, q_lens=q_lens, num_splits=num_splits, out=out,
                                       return_lse=True, **paging, **extra)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, kv_start=start, q_lens=q_lens, return_lse=True,
                                                     **extra)
    assert got is out and lse.shape == (B, N, H_KV * GROUP)
    assert compare(out, ref, fp32_units=64) is None and check_lse(lse, ref_lse) is None


@pytest.mark.parametrize("group", [1, 3, 20])
@pytest.mark.parametrize("batch_invariant", [False, True])
def test_the_packed_query_rows_of_any_group_match_the_reference(group, batch_invariant):
    """A block packs a row's tokens x the group's heads, 16 query rows a block: a group of 1 (5 rows: keys as the mma's
    rows), 3 (15: tokens split inside a block's rows) and 20 (100 rows: 7 blocks a KV head, tokens across blocks)."""
    gen = torch.Generator("cuda").manual_seed(23)
    q = torch.randn(B, N, H_KV * group, D, generator=gen, device="cuda").to(torch.float16)
    k, v = (decode_cache_view(B, H_KV, T, D, torch.float16, gen, capacity=T) for _ in range(2))
    lens = torch.tensor([T, 6, 300, 5], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 4, 100, 0], dtype=torch.int32, device="cuda")
    q_lens = torch.tensor([5, 3, 2, 0], dtype=torch.int32, device="cuda")
    out = torch.full_like(q, float("nan"))
    got, lse = cukiln.decode_attention(q, k, v, lens, kv_start=start, q_lens=q_lens, out=out, return_lse=True,
                                       batch_invariant=batch_invariant)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, kv_start=start, q_lens=q_lens, return_lse=True)
    assert compare(out, ref, fp32_units=64) is None and check_lse(lse, ref_lse) is None


@pytest.mark.parametrize("pipeline", ["narrow", "ws", "ws_deep"])
@pytest.mark.parametrize("form", ["fixed", "paged", "fp8"])
@pytest.mark.parametrize("tokens", [2, 4, 8])
def test_query_tokens_on_each_pipeline_match_the_reference(pipeline, form, tokens):
    """Each pipeline's blocks take a row's tokens x the group's 4 heads, 16 query rows a block (n = 2: 8 rows, keys as
    the mma's rows; 4: 16 rows; 8: two blocks a KV head), every split mode, against the reference; FP8 over ws: blocks
    of 8 rows or fewer, so n = 2 there (the planner refuses more, naming why); paged pools: narrow and ws_deep."""
    from cukiln.tools.decode.checks import forced_decode_pipeline

    if form == "paged" and pipeline == "ws" or form == "fp8" and pipeline == "ws_deep":
        pytest.skip(f"no {pipeline} kernel over {form} caches (the table's choice stands in)")
    if torch.cuda.get_device_capability()[0] < 9 and pipeline != "narrow":
        pytest.skip("the ws pipelines run from sm_90 on")
    gen = torch.Generator("cuda").manual_seed(24 + tokens)
    group, t = 4, 1000
    q = torch.randn(B, tokens, H_KV * group, D, generator=gen, device="cuda").to(torch.bfloat16)
    dtype = torch.float8_e4m3fn if form == "fp8" else torch.bfloat16
    k, v = (decode_cache_view(B, H_KV, t, D, dtype, gen, capacity=t + 24) for _ in range(2))
    extra = {"k_scale": 2.0 ** -7, "v_scale": 0.5} if form == "fp8" else {}
    lens = torch.tensor([t, tokens + 2, 513, tokens], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 4, 100, 0], dtype=torch.int32, device="cuda")  # row 1: a window inside its new tokens
    q_lens = torch.tensor([tokens, tokens - 1, 1, 0], dtype=torch.int32, device="cuda")
    kc, vc, paging = k, v, {}
    if form == "paged":
        (kc, vc), table = paged_copy((k, v), 16, gen=gen)
        paging = {"block_table": table}
    with forced_decode_pipeline(pipeline):
        if form == "fp8" and pipeline == "ws" and tokens * group > 8:
            with pytest.raises(ValueError, match="query rows or fewer"):
                cukiln.decode_attention(q, kc, vc, lens, q_lens=q_lens, **extra)
            return
        for num_splits in (None, 1, 3):
            out = torch.full_like(q, float("nan"))
            got, lse = cukiln.decode_attention(q, kc, vc, lens, kv_start=start, q_lens=q_lens, num_splits=num_splits,
                                               out=out, return_lse=True, **paging, **extra)
            ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, kv_start=start, q_lens=q_lens,
                                                             return_lse=True, **extra)
            assert compare(out, ref, fp32_units=64) is None, num_splits
            assert check_lse(lse, ref_lse) is None, num_splits


def test_a_row_whose_cache_lacks_its_new_tokens_is_nan_and_only_it():
    gen = torch.Generator("cuda").manual_seed(22)
    q = torch.randn(3, 4, 8, D, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(3, 2, 64, D, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([64, 2, 30], dtype=torch.int32, device="cuda")  # row 1 holds 2 keys for its 4 new tokens
    out, lse = cukiln.decode_attention(q, k, v, lens, return_lse=True)
    assert out[1].isnan().all() and lse[1].isnan().all()
    assert not out[[0, 2]].isnan().any() and not lse[[0, 2]].isnan().any()
