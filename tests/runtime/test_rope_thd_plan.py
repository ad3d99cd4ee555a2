"""Packed sequences and context parallel without a GPU: position arithmetic (reference), the token/grid
rule, and every argument check."""

from __future__ import annotations

import pytest

from cukiln.rope_plan import PackedSequences, choose_thd_dispatch, plan_rope
from tests.runtime.test_rope_plan import BASE, contiguous, out_like

torch = pytest.importorskip("torch")


def cu_info(values, device=0):
    return contiguous((len(values),), "int32", BASE * 16, device)


X = contiguous((64, 4, 32))  # [t, h, d]


def plan(x=X, **kw):
    kw.setdefault("base", 10000.0)
    kw.setdefault("layout", "thd")
    return plan_rope(x, out_like(x), **kw)


# --- position arithmetic ---------------------------------------------------------------------------
def test_context_parallel_positions_follow_the_load_balanced_split():
    from cukiln.reference import cp_global_index

    # A global sequence of 16 tokens over cp_size 2: 4 chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1, 2.
    k = torch.arange(8)
    assert cp_global_index(k, 8, 2, 0).tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert cp_global_index(k, 8, 2, 1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    # Every global index is held by exactly one rank.
    held = torch.cat([cp_global_index(torch.arange(6), 6, 4, r) for r in range(4)])
    assert sorted(held.tolist()) == list(range(24))


def test_packed_positions_index_within_each_sequence_plus_offsets():
    from cukiln.reference import packed_positions

    cu = torch.tensor([0, 3, 3, 7], dtype=torch.int32)
    pos, covered = packed_positions(cu, 9, offsets=torch.tensor([10, 20, 30]))
    assert pos[:7].tolist() == [10, 11, 12, 30, 31, 32, 33]
    assert covered.tolist() == [True] * 7 + [False] * 2
    pos, _ = packed_positions(torch.tensor([0, 8, 16], dtype=torch.int32), 8, cp_size=2)
    assert pos.tolist() == [0, 1, 6, 7, 0, 1, 6, 7]  # rank 0: chunks 0 and 3 of each 8-token sequence


def test_reference_thd_equals_dense_per_sequence():
    import cukiln

    x = torch.randn(10, 2, 8, dtype=torch.float64)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    got = cukiln.reference.rope(x, base=100.0, layout="thd", cu_seqlens=cu)
    first = cukiln.reference.rope(x[:4, None], base=100.0)[:, 0]
    second = cukiln.reference.rope(x[4:, None], base=100.0)[:, 0]
    assert torch.equal(got, torch.cat((first, second)))


# --- the token/grid rule ----------------------------------------------------------------------------
def test_rule_picks_grid_only_when_it_launches_few_extra_blocks(monkeypatch):
    from cukiln.generated import dispatch

    monkeypatch.setattr(dispatch, "ROPE_THD_GRID_MAX_WASTE", {"sm_90": 1.5})
    even = PackedSequences(num_seqs=8, max_local=1024, max_global=1024)
    skewed = PackedSequences(num_seqs=8, max_local=4096, max_global=4096)
    unknown = PackedSequences(num_seqs=8, max_local=None, max_global=None)
    assert choose_thd_dispatch(even, 8192, 1, "auto", "sm_90") == ("grid", 1024)
    assert choose_thd_dispatch(skewed, 8192, 1, "auto", "sm_90")[0] == "token"  # 4x the blocks
    assert choose_thd_dispatch(unknown, 8192, 1, "auto", "sm_90")[0] == "token"  # a grid as wide as t
    assert choose_thd_dispatch(unknown, 8192, 1, "grid", "sm_90") == ("grid", 8192)
    assert choose_thd_dispatch(even, 8192, 1, "token", "sm_90")[0] == "token"
    # an arch without tuning data uses the default threshold
    assert choose_thd_dispatch(even, 8192, 1, "auto", "sm_75")[0] == (
        "grid" if dispatch.ROPE_THD_GRID_MAX_WASTE_DEFAULT >= 1.0 else "token")
    with pytest.raises(ValueError, match="CUKILN_ROPE_THD_DISPATCH"):
        choose_thd_dispatch(even, 8192, 1, "fast", "sm_90")


def test_grid_dispatch_puts_sequences_on_y_and_token_dispatch_tokens_on_x():
    cu = cu_info([0, 20, 64])
    grid = plan(cu_seqlens=cu, max_seqlen=44, thd_dispatch="grid")
    token = plan(cu_seqlens=cu, thd_dispatch="token")
    assert grid.key[6] == "grid" and grid.grid[1] == 2 and grid.grid[0] * grid.block[2] >= 44
    assert token.key[6] == "token" and token.grid[1] == 1 and token.grid[0] * token.block[2] >= 64
    assert grid.symbol.endswith("_grid") and token.symbol.endswith("_token")


def test_more_sequences_than_grid_rows_fall_back_to_token():
    cu = contiguous((70_001,), "int32", BASE * 16)
    assert plan(cu_seqlens=cu, max_seqlen=1).key[6] == "token"
    with pytest.raises(ValueError, match="grid dispatch takes at most"):
        plan(cu_seqlens=cu, thd_dispatch="grid")


# --- argument checks ----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,error,match", [
    ({}, ValueError, "needs cu_seqlens"),
    ({"cu_seqlens": contiguous((3,), "int64", BASE * 16)}, TypeError, "int32"),
    ({"cu_seqlens": contiguous((3, 1), "int32", BASE * 16)}, ValueError, "1-D"),
    ({"cu_seqlens": contiguous((3,), "int32", BASE * 16, device=1)}, ValueError, "cuda:0"),
    ({"cu_seqlens": cu_info([0, 64]), "cp_size": 2, "cp_rank": 2}, ValueError, "cp_rank"),
    ({"cu_seqlens": cu_info([0, 64]), "cp_size": 0}, ValueError, "cp_size"),
    ({"cu_seqlens": cu_info([0, 64]), "cp_size": 2.0}, TypeError, "cp_size"),
    ({"cu_seqlens": cu_info([0, 64]), "max_seqlen": -1}, TypeError, "max_seqlen"),
    ({"cu_seqlens": cu_info([0, 64]), "positions": contiguous((64,), "int64")}, ValueError, "not both"),
    ({"cu_seqlens": cu_info([0, 32, 64]), "offsets": contiguous((3,), "int32")}, ValueError, r"shape \[2\]"),
    ({"cu_seqlens": cu_info([0, 10, 5]), "cu_seqlens_host": (0, 10, 5)}, ValueError, "non-decreasing"),
    ({"cu_seqlens": cu_info([0, 6, 64]), "cu_seqlens_host": (0, 6, 64), "cp_size": 2}, ValueError, "divisible"),
    ({"cu_seqlens": cu_info([0, 136]), "cu_seqlens_host": (0, 136), "cp_size": 2}, ValueError, "exceeds"),
    ({"cu_seqlens": cu_info([0, 64]), "cu_seqlens_host": (0, 64), "max_seqlen": 10}, ValueError, "shorter"),
    ({"cu_seqlens": cu_info([0, 64]), "freqs": contiguous((32, 32), "fp32", BASE * 4), "base": None,
      "max_seqlen": 64}, ValueError, "outside the angle table"),
])
def test_bad_thd_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        plan(**kwargs)


def test_dense_layout_rejects_cu_seqlens_and_odd_cp_lengths():
    x = contiguous((7, 2, 4, 32))
    with pytest.raises(ValueError, match="only with layout 'thd'"):
        plan_rope(x, out_like(x), base=10000.0, cu_seqlens=cu_info([0, 7]))
    with pytest.raises(ValueError, match="divisible by 2 \\* cp_size"):
        plan_rope(x, out_like(x), base=10000.0, cp_size=2, cp_rank=1)
    with pytest.raises(ValueError, match="explicit positions"):
        plan_rope(x, out_like(x), base=10000.0, cp_size=2, positions=contiguous((7,), "int64"))


def test_dense_cp_checks_the_table_against_global_positions():
    x = contiguous((8, 2, 4, 32))
    with pytest.raises(ValueError, match="outside the angle table"):
        plan_rope(x, out_like(x), freqs=contiguous((10, 32), "fp32", BASE * 4), cp_size=2, cp_rank=0)
    assert plan_rope(x, out_like(x), freqs=contiguous((16, 32), "fp32", BASE * 4), cp_size=2, cp_rank=1)
