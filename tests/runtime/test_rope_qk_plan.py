"""Planning of rope_qk (q and k in one launch), the packed cos|sin cache, the rotated span's offset, the table-width
rule, and the head split of small grids: on tensor metadata alone (no GPU needed); and the float64 reference of
each against the plain one."""

from __future__ import annotations

import pytest

from cukiln.generated import dispatch
from cukiln.rope_plan import SMALL_GRID_SHARE, plan_rope, split_heads
from cukiln.tensors import TensorInfo

from .test_rope_plan import BASE, contiguous, freqs_for, out_like


def qkv_slices(t=64, hq=32, hk=8, d=128, dtype="bf16"):
    """q and k as slices of one fused [t, (hq + 2 hk) * d] projection, seen as [t, h, d] (thd with positions)."""
    row = (hq + 2 * hk) * d
    q = TensorInfo(BASE, (t, hq, d), (row, d, 1), dtype, 0)
    k = TensorInfo(BASE + hq * d * 2, (t, hk, d), (row, d, 1), dtype, 0)
    return q, k


def positions(t, dtype="int64"):
    return contiguous((t,), dtype, BASE * 16)


def test_q_and_k_slices_of_a_fused_projection_take_one_launch():
    q, k = qkv_slices()
    cache = contiguous((4096, 128), "fp32", BASE * 4)
    plan = plan_rope(q, q, k=k, k_out=k, cos_sin_cache=cache, positions=positions(64), layout="thd", inplace=True)
    assert plan.then is None and plan.symbol.endswith("_qk") and plan.key[7] == 2
    fields = dict(zip(plan.field_names, plan.values))
    assert (fields["heads"], fields["heads_k"]) == (32, 8) and fields["k"] == k.ptr and fields["k_out"] == k.ptr
    assert (fields["x_ss"], fields["k_ss"]) == ((32 + 16) * 128, (32 + 16) * 128)
    assert {(f, arg) for f, arg, _ in plan.pointers} >= {("x", "x"), ("out", "out"), ("k", "k"), ("k_out", "k_out"),
                                                          ("cos", "cos_sin_cache"), ("sin", "cos_sin_cache")}


def test_separate_packed_q_and_k_with_other_head_counts_take_the_packed_pair_kernel():
    q, k = contiguous((8, 1, 32, 64)), contiguous((8, 1, 4, 64), ptr=BASE * 2)
    plan = plan_rope(q, out_like(q), k=k, k_out=out_like(k, BASE * 3), base=10000.0)
    assert plan.then is None and plan.key[4:] == (0, 8, "none", 2, False)


def test_where_no_pair_variant_serves_k_takes_a_second_launch():
    q, k = contiguous((40, 4, 64)), contiguous((40, 2, 64), ptr=BASE * 2)
    cu = contiguous((3,), "int32", BASE * 16)
    plan = plan_rope(q, out_like(q), k=k, k_out=out_like(k, BASE * 3), base=10000.0, layout="thd", cu_seqlens=cu,
                     cu_seqlens_host=(0, 10, 40))
    assert plan.key[7] == 1 and plan.then is not None and plan.then.key[7] == 1
    second = dict(zip(plan.then.field_names, plan.then.values))
    assert second["x"] == k.ptr and second["heads"] == 2
    assert ("x", "k", 0) in plan.then.pointers and ("out", "k_out", 0) in plan.then.pointers
    strided = TensorInfo(BASE * 2, (8, 1, 4, 64), (512, 512, 128, 2), "bf16", 0)  # a strided last dim: 4 strides
    plan = plan_rope(q4 := contiguous((8, 1, 4, 64)), out_like(q4), k=strided, k_out=out_like(strided, BASE * 3),
                     base=10000.0)
    assert plan.then is not None and plan.then.key[4] == 4


@pytest.mark.parametrize("bad, match", [
    ({"k": contiguous((8, 1, 4, 32), ptr=BASE * 2)}, "k: expected q's tokens and head dim"),
    ({"k": contiguous((9, 1, 4, 64), ptr=BASE * 2)}, "k: expected q's tokens and head dim"),
    ({"k": contiguous((8, 1, 4, 64), "fp16", BASE * 2)}, "k: expected q's dtype"),
    ({"k": contiguous((8, 1, 4, 64), ptr=BASE + 64)}, "k: overlaps q"),
    ({"k_out": contiguous((8, 1, 4, 64), ptr=BASE * 8)}, "k_out: overlaps out"),
])
def test_bad_k_is_refused_naming_it(bad, match):
    q = contiguous((8, 1, 4, 64))
    kw = {"k": contiguous((8, 1, 4, 64), ptr=BASE * 2)}
    kw.update(bad)
    kw.setdefault("k_out", out_like(kw["k"], BASE * 3))
    with pytest.raises((ValueError, TypeError), match=match):
        plan_rope(q, out_like(q), base=10000.0, **kw)


def test_the_packed_cache_is_a_half_width_cos_and_sin_table_sharing_rows():
    x = contiguous((16, 1, 8, 128))
    for dtype, kind in (("fp32", "cossinf32"), ("bf16", "cossin")):
        cache = contiguous((64, 96), dtype, BASE * 4)
        plan = plan_rope(x, out_like(x), cos_sin_cache=cache, positions=positions(16, "int32"))
        fields = dict(zip(plan.field_names, plan.values))
        assert plan.key[3] == kind and fields["rotary_dim"] == 96 and fields["per_pair"] == 1
        assert fields["sin"] - fields["cos"] == 48 * (4 if dtype == "fp32" else 2)
        assert fields["cos_row"] == fields["sin_row"] == 96 and fields["positions_int64"] == 0
    with pytest.raises(TypeError, match="cos_sin_cache: expected float32 or x's dtype"):
        plan_rope(x, out_like(x), cos_sin_cache=contiguous((64, 128), "fp16", BASE * 4))
    with pytest.raises(ValueError, match="cos_sin_cache: expected width rotary_dim=64"):
        plan_rope(x, out_like(x), cos_sin_cache=contiguous((64, 128), "fp32", BASE * 4), rotary_dim=64)
    with pytest.raises(ValueError, match="angles: expected exactly one of"):
        plan_rope(x, out_like(x), cos_sin_cache=contiguous((64, 128), "fp32", BASE * 4), base=10000.0)


def test_a_rotary_offset_moves_the_pointers_to_the_span_and_bounds_the_vector():
    x = contiguous((16, 1, 8, 128))
    plan = plan_rope(x, out_like(x), base=10000.0, rotary_dim=64, rotary_offset=64)
    fields = dict(zip(plan.field_names, plan.values))
    assert fields["x"] == x.ptr + 64 * 2 and fields["rotary_offset"] == 64 and plan.key[5] == 8
    assert ("x", "x", 128) in plan.pointers and fields["copy_tail"] == 1
    plan = plan_rope(x, out_like(x), base=10000.0, rotary_dim=64, rotary_offset=2)
    assert plan.key[5] == 2  # 4-byte aligned span: 2-element vectors
    for offset in (-1, 65, 1.5, True):
        with pytest.raises(ValueError, match="rotary_offset"):
            plan_rope(x, out_like(x), base=10000.0, rotary_dim=64, rotary_offset=offset)


def test_a_table_width_that_reads_two_ways_is_an_error_naming_both():
    x = contiguous((16, 1, 8, 128))
    cos = contiguous((64, 64), "fp32", BASE * 4)
    sin = contiguous((64, 64), "fp32", BASE * 5)
    with pytest.raises(ValueError, match=r"full-width.*rotary_dim=64.*half-width.*rotary_dim=128.*give rotary_dim"):
        plan_rope(x, out_like(x), cos=cos, sin=sin)
    for rd in (64, 128):  # either reading, once named
        assert dict(zip(*(p := plan_rope(x, out_like(x), cos=cos, sin=sin, rotary_dim=rd)).__dict__["field_names"]
                        and (p.field_names, p.values)))["rotary_dim"] == rd
    wide = contiguous((64, 128), "fp32", BASE * 4)  # full head width: one reading only
    assert dict(zip((p := plan_rope(x, out_like(x), cos=wide, sin=contiguous((64, 128), "fp32", BASE * 5))).field_names,
                    p.values))["rotary_dim"] == 128
    small = contiguous((64, 80), "fp32", BASE * 4)  # 2 x 80 > 128: only the full-width reading fits
    assert dict(zip((p := plan_rope(x, out_like(x), cos=small, sin=contiguous((64, 80), "fp32", BASE * 5))).field_names,
                    p.values))["rotary_dim"] == 80


def test_small_grids_split_their_heads_over_blocks():
    assert split_heads((8, 20, 1), (1, 1, 1), heads=40, sms=132) == ((8, 1, 1), (1, 1, 20))
    assert split_heads((8, 20, 1), (64, 1, 1), heads=40, sms=132) == ((8, 7, 1), (64, 1, 3))
    assert split_heads((8, 20, 1), (int(132 * SMALL_GRID_SHARE), 1, 1), heads=40, sms=132) == ((8, 20, 1), (66, 1, 1))
    # q and k together: about PAIR_SPLIT_BLOCKS_PER_SM blocks a multiprocessor, one head a thread
    from cukiln.rope_plan import PAIR_SPLIT_BLOCKS_PER_SM

    assert PAIR_SPLIT_BLOCKS_PER_SM > 1
    assert split_heads((8, 20, 1), (64, 1, 1), heads=40, sms=132, pair=True) == ((8, 5, 1), (64, 1, 8))
    q, k = qkv_slices(t=1)
    plan = plan_rope(q, q, k=k, k_out=k, base=10000.0, positions=positions(1), layout="thd", inplace=True)
    bx, by, bz = plan.block
    assert plan.grid[2] * by >= 40 and plan.grid[2] > 1, "every head of q and k has a row of its own"


def test_the_reference_of_the_new_arguments_agrees_with_the_plain_one():
    torch = pytest.importorskip("torch")
    from cukiln import reference

    gen = torch.Generator().manual_seed(3)
    q = torch.randn(12, 6, 64, generator=gen, dtype=torch.float64)
    k = torch.randn(12, 2, 64, generator=gen, dtype=torch.float64)
    pos = torch.randint(0, 30, (12,), generator=gen)
    theta = torch.rand(30, 16, generator=gen, dtype=torch.float64) * 10
    cache = torch.cat([theta.cos(), theta.sin()], dim=1).to(torch.float32)
    kw = dict(positions=pos, layout="thd", rotary_offset=32)
    q_out, k_out = reference.rope_qk(q, k, cos_sin_cache=cache, **kw)
    half = dict(cos=cache[:, :16], sin=cache[:, 16:], rotary_dim=32)
    assert torch.equal(q_out, reference.rope(q, **half, **kw)) and torch.equal(k_out, reference.rope(k, **half, **kw))
    assert torch.equal(q_out[..., :32], q[..., :32])  # outside the span: unchanged
    assert torch.equal(q_out[..., 32:], reference.rope(q[..., 32:], **half, positions=pos, layout="thd"))


def test_mscale_reaches_the_kernel_as_a_field():
    q, k = qkv_slices()
    plan = plan_rope(q, q, k=k, k_out=k, base=10000.0, positions=positions(64), layout="thd", inplace=True,
                     mscale=1.2079)
    assert dict(zip(plan.field_names, plan.values))["mscale"] == 1.2079
    plain = plan_rope(q, q, base=10000.0, positions=positions(64), layout="thd", inplace=True)
    assert dict(zip(plain.field_names, plain.values))["mscale"] == 1.0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), True, "1.2", None])
def test_a_bad_mscale_is_refused_naming_it(bad):
    q, _ = qkv_slices()
    with pytest.raises(ValueError, match="mscale: expected a finite number > 0"):
        plan_rope(q, q, base=10000.0, positions=positions(64), layout="thd", inplace=True, mscale=bad)


def test_packed_thd_tokens_take_one_token_a_block():
    # thd's dense view has a batch dim of one entry and stride 0: the tokens step along s, and each token's heads
    # lie inside it (one token a block, every head visited once, not two tokens sharing half the heads each)
    q, k = qkv_slices(t=200, hq=32, hk=32, d=96)
    plan = plan_rope(q, q, k=k, k_out=k, base=10000.0, positions=positions(200), layout="thd", inplace=True)
    bx, by, bz = plan.block
    assert bz == 1 and bx * by <= 256 and plan.grid[0] == 200


def test_q_and_k_at_many_tokens_take_two_tokens_a_block():
    from cukiln.rope_plan import PAIR_TWO_TOKENS_PER_SM

    for t, sms, expected in ((4096, 132, 2), (PAIR_TWO_TOKENS_PER_SM * 132 - 1, 132, 1), (4096, 512, 1)):
        q, k = qkv_slices(t=t)
        plan = plan_rope(q, q, k=k, k_out=k, base=10000.0, positions=positions(t), layout="thd", inplace=True,
                         sms=sms)
        bx, by, bz = plan.block
        assert bz == expected and plan.grid[0] == -(-t // bz) and bx * by * bz <= 256, (t, sms)
    single = plan_rope(q, q, base=10000.0, positions=positions(4096), layout="thd", inplace=True)
    assert single.block[2] == 1, "a single tensor keeps one token a block"
