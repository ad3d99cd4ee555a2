"""Several query tokens a row (speculative verification, multi-token prediction) on the CPU: the float64 reference gives
token j of row i exactly the single-token attention over keys [kv_start, kv_lens - n_i + j + 1), padding tokens (from
q_lens on) zeros and -inf, a window starting inside the new tokens an empty range to the tokens before it; the planner
maps query rows to cache rows, keeps the ws pipelines for one token a row, and refuses what it cannot serve."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln.decode_plan import plan_decode  # noqa: E402
from cukiln.tools.decode.checks import paged_copy  # noqa: E402

from .test_paged_decode import BASE, _info  # noqa: E402

B, N, H_KV, GROUP, T, D = 3, 4, 2, 3, 40, 64


def _inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, N, H_KV * GROUP, D, generator=gen).to(torch.bfloat16)
    k, v = (torch.randn(B, H_KV, T, D, generator=gen).to(torch.bfloat16) for _ in range(2))
    return q, k, v, gen


@pytest.mark.parametrize("paged", [False, True])
def test_each_token_attends_to_its_row_up_to_itself(paged):
    q, k, v, gen = _inputs()
    lens = torch.tensor([T, 9, 20], dtype=torch.int32)
    start = torch.tensor([0, 7, 3], dtype=torch.int32)  # row 1's window starts inside its new tokens
    q_lens = torch.tensor([4, 3, 0], dtype=torch.int32)
    sinks = torch.linspace(-2.0, 2.0, H_KV * GROUP)
    extra = {}
    kc, vc = k, v
    if paged:
        (kc, vc), table = paged_copy((k, v), 8, gen=gen)
        extra["block_table"] = table
    out, lse = cukiln.reference.decode_attention(q, kc, vc, lens, kv_start=start, q_lens=q_lens, sinks=sinks,
                                                 return_lse=True, **extra)
    assert out.shape == q.shape and lse.shape == (B, N, H_KV * GROUP)
    for i in range(B):
        for j in range(N):
            if j >= q_lens[i]:  # padding: no key, no sink weight on an output of zeros
                assert torch.equal(out[i, j], torch.zeros_like(out[i, j]))
                continue
            end = int(lens[i] - q_lens[i] + j + 1)
            first = min(int(start[i]), end)
            want, want_lse = cukiln.reference.decode_attention(q[i:i + 1, j], k[i:i + 1, :, first:end],
                                                               v[i:i + 1, :, first:end], end - first, sinks=sinks,
                                                               return_lse=True)
            assert torch.allclose(out[i, j], want[0], rtol=1e-12, atol=1e-12), (i, j)
            assert torch.allclose(lse[i, j], want_lse[0], rtol=1e-12, atol=1e-12), (i, j)
    assert (lse[1, 0] == sinks.double()).all()  # row 1's first token: its window (from 7) starts after it (end 7)


def test_counts_and_lengths_given_on_the_host_are_checked():
    # (on the device they are not read back: a row whose cache lacks its new tokens gives NaN, the GPU tests)
    q, k, v, _ = _inputs()
    with pytest.raises(ValueError, match=r"q_lens: expected counts in \[0, 4\]"):
        cukiln.reference.decode_attention(q, k, v, T, q_lens=torch.tensor([4, 5, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"kv_lens: the caches hold each row's 4 new tokens"):
        cukiln.reference.decode_attention(q, k, v, 3)
    many = torch.zeros(q.shape[0], 17, *q.shape[2:], dtype=q.dtype)
    with pytest.raises(ValueError, match=r"q: at most 16 query tokens a row \(\[b, n, h_q, d\]\), got n = 17"):
        cukiln.reference.decode_attention(many, k, v, T)


def test_the_planner_packs_a_rows_tokens_into_the_blocks_of_its_kv_heads():
    q = _info((4, 3, 8, 128))
    k, v = _info((4, 2, 300, 128), ptr=BASE * 8), _info((4, 2, 300, 128), ptr=BASE * 64)
    p = plan_decode(q, k, v, 300, sms=132, arch="sm_90")
    # 3 tokens x a group of 4 heads: 12 query rows a KV head, one block's 16; the grid's rows are the cache's
    assert p.batch == 12 and p.tokens == 3 and p.attention.grid[1:] == (2, 4) and p.fields["head_groups"] == 1
    assert p.fields["queries"] == 3 and p.fields["q_sb"] == 8 * 128  # a query row is a token
    p = plan_decode(_info((4, 6, 8, 128)), k, v, 300, sms=132, arch="sm_90")
    assert p.fields["head_groups"] == 2 and p.attention.grid[1:] == (4, 4)  # 24 query rows a KV head: 2 blocks
    with pytest.raises(ValueError, match="q: .* rows and tokens mergeable"):
        plan_decode(_info((4, 3, 8, 128), strides=(8 * 128 * 5, 8 * 128, 128, 1)), k, v, 300)
    with pytest.raises(ValueError, match="out: expected q's shape"):
        plan_decode(q, k, v, 300, out=_info((4, 8, 128), ptr=BASE * 128))
