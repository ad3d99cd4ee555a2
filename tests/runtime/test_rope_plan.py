"""Dispatch-key selection from tensor metadata alone, and every bad-input error (no GPU needed)."""

from __future__ import annotations

import pytest

from cukiln.generated import dispatch
from cukiln.rope_plan import plan_rope, stride_count, widest_vector
from cukiln.tensors import TensorInfo

BASE = 1 << 30  # a 256-byte aligned fake device address


def contiguous(shape, dtype="bf16", ptr=BASE, device=0):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return TensorInfo(ptr, tuple(shape), tuple(reversed(strides)), dtype, device)


def view(t: TensorInfo, order):
    """A permuted view (like torch's permute)."""
    return TensorInfo(t.ptr, tuple(t.shape[i] for i in order), tuple(t.strides[i] for i in order), t.dtype, t.device)


def freqs_for(max_pos, width, ptr=BASE * 4):
    return contiguous((max_pos, 1, 1, width), "fp32", ptr)


def out_like(x, ptr=BASE * 8):
    return TensorInfo(ptr, x.shape, x.strides, x.dtype, x.device)


def key(x, out=None, **kw):
    return plan_rope(x, out or out_like(x), **kw).key


def test_contiguous_sbhd_and_bshd_are_packed_with_16_byte_vectors():
    for layout in ("sbhd", "bshd"):
        x = contiguous((64, 4, 8, 128))
        assert key(x, freqs=freqs_for(64, 128), layout=layout)[4:7] == (0, 8, "none")


def test_transposed_bhsd_view_takes_three_strides_no_copy():
    bhsd = contiguous((2, 32, 4096, 128))
    x = view(bhsd, (0, 2, 1, 3))  # (b, s, h, d) view of (b, h, s, d) storage
    plan = plan_rope(x, x, freqs=freqs_for(4096, 128), layout="bshd", inplace=True)
    assert plan.key[4:7] == (3, 8, "none")
    assert plan.values[:2] == (bhsd.ptr, bhsd.ptr)


def test_strided_last_dim_takes_four_strides_and_scalars():
    base = contiguous((16, 2, 4, 128))
    x = TensorInfo(base.ptr, (16, 2, 4, 64), (1024, 512, 128, 2), "bf16", 0)
    assert key(x, base=10000.0, out=contiguous((16, 2, 4, 64), ptr=BASE * 8))[4:7] == (4, 1, "none")


@pytest.mark.parametrize("offset_elems,expected", [(0, 8), (4, 4), (2, 2), (1, 1)])
def test_pointer_alignment_caps_the_vector(offset_elems, expected):
    x = contiguous((8, 2, 4, 64), ptr=BASE + 2 * offset_elems)
    assert key(x, base=10000.0)[5] == expected


def test_rotary_and_tail_sizes_cap_the_vector():
    x = contiguous((8, 2, 4, 64))
    assert key(x, freqs=freqs_for(8, 24))[5] == 4  # half = 12 pairs: groups of 4
    assert key(x, freqs=freqs_for(8, 24), interleaved=True)[5] == 4  # 24 % (2 * 4) == 0
    assert key(x, freqs=freqs_for(8, 20), interleaved=True)[5] == 2  # 20 % (2 * 4) != 0
    x2 = contiguous((8, 2, 4, 66))
    assert key(x2, freqs=freqs_for(8, 64))[5] == 2  # the copied tail of 2 and the row stride of 66
    assert plan_rope(x2, x2, freqs=freqs_for(8, 64), inplace=True).key[5] == 2  # row stride 66 still


def test_vector_width_never_exceeds_16_bytes():
    x = contiguous((8, 2, 4, 64), "fp32")
    assert key(x, base=10000.0)[5] == 4


def test_widest_vector_and_stride_count_helpers():
    assert widest_vector(2, 128, 128, False, False, 4, (BASE,), ()) == 1
    assert stride_count((4, 2, 3, 8), (48, 24, 8, 1), (48, 24, 8, 1), True) == 0
    assert stride_count((4, 2, 3, 8), (48, 24, 8, 1), (96, 24, 8, 1), True) == 3
    assert stride_count((4, 2, 3, 8), (48, 24, 8, 1), (48, 24, 8, 2), True) == 4


def test_every_angle_source_key_and_the_direction_argument():
    x = contiguous((8, 2, 4, 64))
    assert key(x, freqs=freqs_for(8, 64))[3] == "freqs"
    cache_bf16 = contiguous((8, 32), "bf16", BASE * 5)
    assert key(x, cos=cache_bf16, sin=cache_bf16, rotary_dim=64)[3] == "cossin"
    cache32 = contiguous((8, 64), "fp32", BASE * 5)
    assert key(x, cos=cache32, sin=cache32)[3] == "cossinf32"
    assert key(x, inv_freq=contiguous((32,), "fp32", BASE * 6))[3] == "invfreq"
    assert key(x, base=10000.0, backward=True, interleaved=True)[:3] == ("bf16", "dense", "interleaved")
    # one kernel for both directions: backward changes the kernel argument, not the variant
    fwd, bwd = (plan_rope(x, out_like(x), base=10000.0, backward=b) for b in (False, True))
    assert fwd.symbol == bwd.symbol
    names = dispatch.ROPE_PARAMS[dispatch.ROPE[fwd.key][2]][0]
    flag = names.index("backward")
    assert (fwd.values[flag], bwd.values[flag]) == (0, 1)
    assert fwd.values[:flag] + fwd.values[flag + 1:] == bwd.values[:flag] + bwd.values[flag + 1:]


def test_half_width_cos_sin_sets_per_pair():
    x = contiguous((8, 2, 4, 64))
    half = contiguous((8, 32), "bf16", BASE * 5)
    plan = plan_rope(x, out_like(x), cos=half, sin=half, rotary_dim=64)
    from cukiln.generated import dispatch

    names = dispatch.ROPE_PARAMS[dispatch.ROPE[plan.key][2]][0]
    assert plan.values[names.index("per_pair")] == 1


def test_block_shape_stays_within_the_limit():
    for shape in ((4096, 1, 128, 128), (512, 32, 24, 128), (1, 1, 1, 64), (7, 3, 300, 256)):
        plan = plan_rope(contiguous(shape), out_like(contiguous(shape)), base=10000.0)
        bx, by, bz = plan.block
        assert bx * by * bz <= 256 and plan.grid[0] * bz >= shape[0] * shape[1]


def test_every_block_shape_fits_the_launch_bound():
    # every group count (rotary_dim / 2 / vector), head count (q and k's together for rope_qk), token count,
    # memory order and rule: an odd head-row count halved for two tokens once rounded past the bound
    from cukiln.rope_plan import block_shape

    for groups in range(1, 65):
        for heads in (1, 2, 3, 7, 32, 40, 63, 64, 65, 128, 257):
            for tokens in (1, 2, 3, 100):
                for two_tokens in (False, True):
                    for max_threads, min_threads, passes in ((256, 64, 1), (128, 64, 1), (64, 32, 1), (256, 64, 2)):
                        bx, by, bz = block_shape(groups, heads, tokens, two_tokens, max_threads, min_threads, passes)
                        assert bx * by * bz <= max_threads, (groups, heads, tokens, two_tokens, max_threads)
                        assert bx >= 1 and by >= 1 and 1 <= bz <= tokens


def test_block_shape_follows_memory_order():
    from cukiln.generated.dispatch import ROPE_HEADS_IN_FLIGHT as HF, ROPE_LAUNCH_DEFAULT
    from cukiln.rope_plan import block_shape as shape_with

    def block_shape(*args, **kwargs):  # the default rule: 64 to 256 threads
        return shape_with(*args, **kwargs, max_threads=ROPE_LAUNCH_DEFAULT["max_threads"],
                          min_threads=ROPE_LAUNCH_DEFAULT["min_threads"])

    assert block_shape(8, 128, 4096, two_tokens=False) == (8, min(128 // HF, 32), 1)  # one token, all heads
    assert block_shape(8, 32, 8192, two_tokens=False) == (8, 32 // HF, 1)
    assert block_shape(8, 32, 8192, two_tokens=True) == (8, 16 // HF, 2)  # two tokens, two passes over heads
    assert block_shape(8, 1, 100, two_tokens=False) == (8, 1, 8)  # at least 64 threads
    assert block_shape(8, 32, 8192, two_tokens=False, head_passes=2) == (8, 32 // HF // 2, 1)  # half the head rows
    # 24 heads: 6 head rows, 3 a token of two, 48 threads: four tokens a block to reach 64
    assert block_shape(8, 24, 8192, two_tokens=True, head_passes=2) == (8, 3, 4)
    assert block_shape(2, 1, 3, two_tokens=False) == (2, 1, 2)  # never more token rows than tokens


def test_transposed_view_plans_head_outer_blocks():
    import torch

    from cukiln.tensors import from_torch

    S, B, H, D = 64, 2, 32, 128
    x = torch.empty(B, H, S, D, dtype=torch.bfloat16).transpose(1, 2)
    xi = from_torch(x, "x", cuda=False)
    from cukiln.generated.dispatch import ROPE_HEADS_IN_FLIGHT as HF

    plan = plan_rope(xi, xi, base=10000.0, layout="bshd", sms=1)  # (a grid that fills its GPU: no head split)
    assert plan.block == (8, H // HF // 2, 2)
    dense = from_torch(torch.empty(B, S, H, D, dtype=torch.bfloat16), "x", cuda=False)
    assert plan_rope(dense, out_like(dense), base=10000.0, layout="bshd", sms=1).block == (8, H // HF, 1)


def test_empty_tensor_plans_no_launch():
    x = contiguous((0, 2, 4, 64))
    assert plan_rope(x, out_like(x), base=10000.0) is None


# --- bad input: ValueError / TypeError naming the argument ----------------------------------------
X = contiguous((8, 2, 4, 64))


@pytest.mark.parametrize("kwargs,error,match", [
    ({}, ValueError, "exactly one of"),
    ({"base": 10000.0, "freqs": freqs_for(8, 64)}, ValueError, "exactly one of"),
    ({"cos": contiguous((8, 64), "bf16")}, ValueError, "both cos and sin"),
    ({"freqs": contiguous((8, 64), "bf16")}, TypeError, "freqs: expected float32"),
    ({"freqs": freqs_for(8, 63)}, ValueError, "rotary_dim"),
    ({"freqs": freqs_for(8, 66)}, ValueError, "rotary_dim"),
    ({"freqs": freqs_for(8, 64), "rotary_dim": 32}, ValueError, "freqs: expected width"),
    ({"freqs": contiguous((8, 2, 64), "fp32")}, ValueError, "freqs: expected shape"),
    ({"freqs": TensorInfo(BASE, (8, 64), (1, 8), "fp32", 0)}, ValueError, "contiguous last"),
    ({"freqs": freqs_for(8, 64), "rope_scale": 2.0}, ValueError, "rope_scale"),
    ({"base": 10000.0, "rotary_dim": 7}, ValueError, "rotary_dim"),
    ({"base": -1.0}, ValueError, "base"),
    ({"base": 10000.0, "rope_scale": "x"}, TypeError, "rope_scale"),
    ({"inv_freq": contiguous((33,), "fp32")}, ValueError, "rotary_dim"),
    ({"inv_freq": contiguous((32,), "fp16")}, TypeError, "inv_freq"),
    ({"cos": contiguous((8, 64), "fp16"), "sin": contiguous((8, 64), "fp16")}, TypeError, "cos/sin"),
    ({"cos": contiguous((8, 64), "bf16"), "sin": contiguous((9, 64), "bf16")}, ValueError, "sin: expected"),
    ({"cos": contiguous((8, 48), "bf16"), "sin": contiguous((8, 48), "bf16"), "rotary_dim": 64}, ValueError, "width"),
    ({"freqs": freqs_for(8, 64), "offsets": 1}, ValueError, "outside the angle table"),
    ({"freqs": freqs_for(8, 64), "offsets": -1}, ValueError, "outside the angle table"),
    ({"base": 1e4, "offsets": 1.5}, TypeError, "offsets"),
    ({"base": 1e4, "offsets": contiguous((3,), "int32")}, ValueError, "offsets: expected a contiguous"),
    ({"base": 1e4, "offsets": contiguous((2,), "fp32")}, TypeError, "offsets"),
    ({"base": 1e4, "positions": contiguous((9,), "int32")}, ValueError, "positions: expected shape"),
    ({"base": 1e4, "positions": contiguous((8,), "fp32")}, TypeError, "positions"),
    ({"base": 1e4, "positions": contiguous((8,), "int32"), "offsets": 1}, ValueError, "not both"),
    ({"base": 1e4, "layout": "hsbd"}, ValueError, "layout"),
    ({"freqs": contiguous((8, 64), "fp32", device=1)}, ValueError, "freqs: expected a tensor on cuda:0"),
    ({"base": 1e4, "positions": contiguous((8,), "int32", device=1)}, ValueError, "positions"),
    # a CPU table beside a GPU x (the float64 reference takes CPU tensors, and describes them as device -1)
    ({"inv_freq": contiguous((32,), "fp32", device=-1)}, ValueError, "inv_freq: .* got one on the CPU"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        plan_rope(X, out_like(X), **kwargs)


def test_bad_x_and_out():
    with pytest.raises(TypeError, match="x: expected float32"):
        plan_rope(contiguous((8, 2, 4, 64), "int32"), out_like(X), base=1e4)
    with pytest.raises(ValueError, match="x: expected a 4-D"):
        x3 = contiguous((8, 4, 64))
        plan_rope(x3, out_like(x3), base=1e4)
    with pytest.raises(ValueError, match="out: expected x's (shape|dtype)"):
        plan_rope(X, contiguous((8, 2, 4, 32), ptr=BASE * 8), base=1e4)
    with pytest.raises(ValueError, match="out: expected"):
        plan_rope(X, contiguous((8, 2, 4, 64), "fp16", ptr=BASE * 8), base=1e4)
    with pytest.raises(ValueError, match="out: overlaps x"):
        plan_rope(X, out_like(X, ptr=X.ptr + 128), base=1e4)
    with pytest.raises(ValueError, match="out: overlaps freqs"):
        f = freqs_for(8, 64)
        plan_rope(X, out_like(X, ptr=f.ptr), freqs=f, guarded=(("freqs", f),))
    with pytest.raises(ValueError, match="inplace=True"):
        plan_rope(X, out_like(X), base=1e4, inplace=True)
    with pytest.raises(ValueError, match="broadcast"):
        bx = TensorInfo(BASE, (8, 2, 4, 64), (0, 256, 64, 1), "bf16", 0)
        plan_rope(bx, bx, base=1e4, inplace=True)


def test_in_place_only_when_out_is_exactly_x():
    plan = plan_rope(X, X, base=1e4)  # out given as x itself: in place, the tail is not copied
    from cukiln.generated import dispatch

    names = dispatch.ROPE_PARAMS[dispatch.ROPE[plan.key][2]][0]
    assert plan.values[names.index("copy_tail")] == 0


def test_the_tuned_launch_rule_applies_to_dense_layouts_of_its_arch(monkeypatch):
    from cukiln.generated import dispatch

    x = contiguous((64, 4, 32, 128))
    default = plan_rope(x, out_like(x), base=10000.0, arch="sm_90")
    assert default.key[4:6] == (0, 8) and default.block == (8, 16, 1)
    rule = {"max_vector_bytes": 8, "packed_kernel": False, "max_threads": 128, "min_threads": 256, "head_passes": 1}
    monkeypatch.setattr(dispatch, "ROPE_LAUNCH", {"sm_90": rule})
    tuned = plan_rope(x, out_like(x), base=10000.0, arch="sm_90")
    assert tuned.key[4:6] == (3, 4)  # the strided kernel, 8-byte vectors
    assert tuned.block == (16, 8, 1)  # 16 pair groups x 8 head rows = 128 threads: min_threads capped by max
    monkeypatch.setattr(dispatch, "ROPE_LAUNCH", {"sm_90": {**dispatch.ROPE_LAUNCH_DEFAULT, "head_passes": 2}})
    two_passes = plan_rope(x, out_like(x), base=10000.0, arch="sm_90")
    assert two_passes.key == default.key and two_passes.block == (8, 8, 1)  # 8 rows x 2 heads in flight x 2 passes
    # where the tune measured two passes slower, one: fp32, and a rotation of part of the head
    wide = contiguous((64, 4, 32, 128), "fp32")
    assert plan_rope(wide, out_like(wide), base=10000.0, arch="sm_90").block == (16, 16, 1)
    partial = plan_rope(x, out_like(x), base=10000.0, rotary_dim=32, arch="sm_90")
    assert partial.block == (2, 16, 2)  # 2 pair groups x 16 head rows, two tokens to reach 64 threads
    # q and k together (rope_qk), which the tune does not time: one pass, as under the default rule
    k = contiguous((64, 4, 8, 128), ptr=BASE * 16)
    monkeypatch.setattr(dispatch, "ROPE_LAUNCH", {})
    pair_default = plan_rope(x, out_like(x), base=10000.0, arch="sm_90", k=k, k_out=out_like(k, ptr=BASE * 32))
    monkeypatch.setattr(dispatch, "ROPE_LAUNCH", {"sm_90": {**dispatch.ROPE_LAUNCH_DEFAULT, "head_passes": 2}})
    pair = plan_rope(x, out_like(x), base=10000.0, arch="sm_90", k=k, k_out=out_like(k, ptr=BASE * 32))
    assert (pair.key, pair.grid, pair.block) == (pair_default.key, pair_default.grid, pair_default.block)
    other = plan_rope(x, out_like(x), base=10000.0, arch="sm_80")  # other archs: the default launch
    assert (other.key, other.grid, other.block) == (default.key, default.grid, default.block)
    assert default.overlap_previous and not other.overlap_previous  # programmatic launches from sm_90 on
    thd = contiguous((256, 32, 128))
    positions = contiguous((256,), "int32", BASE * 2)
    assert plan_rope(thd, out_like(thd), base=10000.0, layout="thd", positions=positions, arch="sm_90").key[4:6] == (0, 8)


def test_token_count_is_capped_where_the_kernels_int_token_loop_would_wrap():
    from cukiln.rope_plan import MAX_TOKENS

    assert 2 * MAX_TOKENS + 1024 <= 2**31 - 1
    x = contiguous((MAX_TOKENS, 1, 1, 8))
    assert plan_rope(x, out_like(x, ptr=BASE * 64), base=10000.0) is not None
    for shape in ((MAX_TOKENS + 1, 1, 1, 8), (2**30, 2, 1, 8)):
        x = contiguous(shape)
        with pytest.raises(ValueError, match=f"at most {MAX_TOKENS} tokens"):
            plan_rope(x, out_like(x, ptr=BASE * 64), base=10000.0)


def test_out_viewing_x_as_another_dtype_is_not_in_place():
    x = contiguous((8, 2, 4, 64), "fp16")
    as_bf16 = TensorInfo(x.ptr, x.shape, x.strides, "bf16", x.device)
    assert not as_bf16.same_view(x)
    with pytest.raises(ValueError, match="out: expected x's (shape|dtype)"):
        plan_rope(x, as_bf16, base=10000.0)
