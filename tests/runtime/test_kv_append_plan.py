"""kv_append planning on tensor metadata alone (no GPU): the variant and launch a call takes, the fields the kernel
reads, every bad input refused naming the argument; and the float64 reference's slot and position arithmetic."""

from __future__ import annotations

import pytest

from cukiln.generated import dispatch
from cukiln.kv_append_plan import plan_kv_append
from cukiln.tensors import TensorInfo

from .test_rope_plan import BASE, contiguous

B, N, HQ, HKV, D, T = 2, 1, 32, 8, 128, 4096


def _call(q_shape=(B, HQ, D), kv_shape=(B, HKV, D), cache_shape=(B, HKV, T, D), **kw):
    """A decode step's tensors: q, k and v slices of one fused projection, caches in their own buffers."""
    row = (HQ + 2 * HKV) * D
    if len(q_shape) == 3:
        q = TensorInfo(BASE, q_shape, (row, D, 1), "bf16", 0)
        k = TensorInfo(BASE + HQ * D * 2, kv_shape, (row, D, 1), "bf16", 0)
        v = TensorInfo(BASE + (HQ + HKV) * D * 2, kv_shape, (row, D, 1), "bf16", 0)
    else:
        q, k, v = (contiguous(s, ptr=BASE * m) for s, m in ((q_shape, 1), (kv_shape, 2), (kv_shape, 3)))
    args = dict(q=q, out=kw.pop("out", contiguous(q.shape, ptr=BASE * 4)), k_new=k, v_new=v,
                k_cache=contiguous(cache_shape, ptr=BASE * 16), v_cache=contiguous(cache_shape, ptr=BASE * 32),
                kv_lens=kw.pop("kv_lens", contiguous((B,), "int32", BASE * 64)), base=10000.0)
    args.update(kw)
    return args


def test_a_decode_step_of_fused_slices_takes_one_launch_with_16_byte_vectors():
    plan = plan_kv_append(**_call())
    assert plan.symbol == "kv_append_bf16_half_any_v8" and plan.key == ("bf16", "half", "base", 8, False)
    assert plan.shared == 0
    f = dict(zip(plan.field_names, plan.values))
    assert (f["batch"], f["new_tokens"], f["heads_q"], f["heads_kv"], f["capacity"]) == (B, 1, HQ, HKV, T)
    assert (f["q_sb"], f["q_sh"], f["k_sb"]) == ((HQ + 2 * HKV) * D, D, (HQ + 2 * HKV) * D)
    assert (f["k_cache_sb"], f["k_cache_ss"], f["k_cache_sh"]) == (HKV * T * D, D, T * D)  # bhsd
    assert f["kv_lens"] == BASE * 64 and f["copy_tail"] == 0
    # the kernel takes any angle source: base's fields, the others' zero, and base picked by angle_kind
    assert f["angle_kind"] == dispatch.ANGLE_KINDS["base"] and f["exponent_step"] < 0
    assert f["table"] == f["cos"] == f["inv_freq"] == 0
    assert plan.grid[0] * plan.block[2] >= B and plan.block[0] * plan.block[1] * plan.block[2] <= 256
    assert {arg for _, arg, _ in plan.pointers} == {"q", "out", "k_new", "v_new", "k_cache", "v_cache", "kv_lens"}


def test_bshd_caches_chunks_of_new_tokens_and_explicit_positions():
    cache = (B, T, HKV, D)
    positions = contiguous((B, 3), "int64", BASE * 128)
    plan = plan_kv_append(**_call(q_shape=(B, 3, HQ, D), kv_shape=(B, 3, HKV, D), cache_shape=cache,
                                  out=contiguous((B, 3, HQ, D), ptr=BASE * 4), kv_layout="bshd",
                                  positions=positions, kv_start=2, interleaved=True, rotary_dim=64, rotary_offset=64))
    f = dict(zip(plan.field_names, plan.values))
    assert (f["k_cache_ss"], f["k_cache_sh"], f["new_tokens"]) == (HKV * D, D, 3)
    assert (f["positions_int64"], f["pos_stride_b"], f["pos_stride_s"], f["kv_start_value"]) == (1, 3, 1, 2)
    assert f["q"] == BASE + 64 * 2 and f["copy_tail"] == 1 and plan.key[1] == "interleaved"


def test_qk_norm_takes_its_own_variant_with_the_weights_and_a_row_of_shared_memory_a_token():
    qw, kw = contiguous((D,), "bf16", BASE * 512), contiguous((D,), "bf16", BASE * 640)
    plan = plan_kv_append(**_call(q_norm_weight=qw, k_norm_weight=kw, norm_eps=1e-5))
    assert plan.symbol == "kv_append_bf16_half_any_v8_qknorm" and plan.key[-1] is True
    f = dict(zip(plan.field_names, plan.values))
    assert (f["q_norm_weight"], f["k_norm_weight"], f["norm_weight_fp32"], f["norm_eps"]) == (qw.ptr, kw.ptr, 0, 1e-5)
    assert plan.shared == plan.block[2] * (HQ + HKV) * 4
    assert {"q_norm_weight", "k_norm_weight"} <= {arg for _, arg, _ in plan.pointers}
    only_k = plan_kv_append(**_call(k_norm_weight=contiguous((D,), "fp32", BASE * 640)))
    g = dict(zip(only_k.field_names, only_k.values))
    assert (g["q_norm_weight"], g["norm_weight_fp32"]) == (0, 1)
    # many tokens a block: the block's rows shrink until their inverse RMS fit 48 KB of shared memory
    many = plan_kv_append(**_call(q_shape=(64, 8, 128, D), kv_shape=(64, 8, 128, D), cache_shape=(64, 128, T, D),
                                  out=contiguous((64, 8, 128, D), ptr=BASE * 4),
                                  kv_lens=contiguous((64,), "int32", BASE * 64), q_norm_weight=qw))
    assert many.shared <= 48 * 1024 and many.grid[0] * many.block[2] >= 64 * 8
    with pytest.raises(ValueError, match="written tensor|overlaps"):
        plan_kv_append(**_call(q_norm_weight=TensorInfo(BASE * 16, (D,), (1,), "bf16", 0)))  # in the key cache


def test_host_lengths_are_checked_before_anything_is_written():
    with pytest.raises(ValueError, match="row 1 holds 4096 tokens"):
        plan_kv_append(**_call(kv_lens=contiguous((B,), "int32", BASE * 64)), kv_lens_host=(10, T))
    with pytest.raises(ValueError, match="kv_lens: row 0 holds 3 tokens from kv_start 5"):
        plan_kv_append(**_call(kv_lens=3, kv_start=5))
    assert plan_kv_append(**_call(kv_lens=T - 1)) is not None  # the last slot


@pytest.mark.parametrize("kw, error, match", [
    ({"kv_layout": "bsdh"}, ValueError, "kv_layout"),
    ({"kv_lens": -1}, ValueError, "kv_lens: row 0 holds -1 tokens"),
    ({"kv_lens": 2.0}, TypeError, "kv_lens"),
    ({"kv_lens": True}, TypeError, "kv_lens"),
    ({"kv_lens": contiguous((B,), "int64", BASE * 64)}, TypeError, "kv_lens: expected an int32 tensor"),
    ({"kv_lens": contiguous((B + 1,), "int32", BASE * 64)}, ValueError, r"expected shape \(2,\)"),
    ({"kv_lens": contiguous((B,), "int32", BASE * 64, device=1)}, ValueError, "kv_lens: expected a tensor on cuda:0"),
    ({"kv_start": contiguous((B,), "int32", BASE * 64, device=-1)}, ValueError, "got one on the CPU"),
    ({"cache_shape": (B, HKV, T, 64)}, ValueError, "k_cache, v_cache: expected"),
    ({"cache_shape": (B, HKV, T)}, ValueError, "k_cache: expected a 4-d cache"),
    ({"kv_shape": (B + 1, HKV, D)}, ValueError, "k_new, v_new: expected q.s rows"),
    ({"out": contiguous((B, HQ, 64), ptr=BASE * 4)}, ValueError, "out: expected q's shape"),
    ({"out": contiguous((B, HQ, D), ptr=BASE)}, ValueError, "out: overlaps q"),
    ({"positions": contiguous((B, 2), "int32", BASE * 128)}, ValueError, r"positions: expected shape \[2, 1\]"),
    ({"positions": contiguous((B,), "fp32", BASE * 128)}, TypeError, "positions: expected int32 or int64"),
    ({"rotary_offset": 8}, ValueError, "rotary_offset"),
    ({"mscale": 0.0}, ValueError, "mscale"),
    ({"base": None}, ValueError, "angles: expected exactly one"),
    ({"base": None, "freqs": contiguous((16, D), "fp32", BASE * 256), "kv_lens": 20}, ValueError,
     "outside the angle table of 16 rows"),
    ({"q_norm_weight": contiguous((D,), "fp16", BASE * 512)}, TypeError, "q_norm_weight: expected float32 or q's"),
    ({"k_norm_weight": contiguous((D // 2,), "fp32", BASE * 512)}, ValueError, r"k_norm_weight: expected a contig"),
    ({"k_norm_weight": TensorInfo(BASE * 512, (D,), (2,), "fp32", 0)}, ValueError, "k_norm_weight: expected a contig"),
    ({"q_norm_weight": contiguous((D,), "fp32", BASE * 512, device=1)}, ValueError, "q_norm_weight: expected a tens"),
    ({"q_norm_weight": contiguous((D,), "fp32", BASE * 512), "k_norm_weight": contiguous((D,), "bf16", BASE * 640)},
     TypeError, "one dtype for both"),
    ({"q_norm_weight": contiguous((D,), "fp32", BASE * 512), "norm_eps": -1e-6}, ValueError, "norm_eps"),
    ({"q_norm_weight": contiguous((D,), "fp32", BASE * 512), "norm_eps": float("nan")}, ValueError, "norm_eps"),
    ({"q_norm_weight": contiguous((D,), "fp32", BASE * 512), "norm_eps": True}, ValueError, "norm_eps"),
])
def test_bad_arguments_are_refused_naming_them(kw, error, match):
    with pytest.raises(error, match=match):
        plan_kv_append(**_call(**kw))


def test_a_cache_overlapping_what_is_read_is_refused():
    args = _call()
    args["v_cache"] = TensorInfo(BASE * 16 + 64, args["k_cache"].shape, args["k_cache"].strides, "bf16", 0)
    with pytest.raises(ValueError, match="k_cache: overlaps v_cache"):
        plan_kv_append(**args)
    args = _call()
    args["k_cache"] = TensorInfo(BASE, args["k_cache"].shape, args["k_cache"].strides, "bf16", 0)  # over q
    with pytest.raises(ValueError, match="k_cache: overlaps q"):
        plan_kv_append(**args)


def test_nothing_to_do_for_no_rows():
    assert plan_kv_append(**_call(q_shape=(0, HQ, D), kv_shape=(0, HKV, D), cache_shape=(0, HKV, T, D),
                                  out=contiguous((0, HQ, D), ptr=BASE * 4),
                                  kv_lens=contiguous((0,), "int32", BASE * 64))) is None


# --- the float64 reference ----------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def test_the_reference_normalizes_each_head_before_the_rotation():
    from cukiln.reference import kv_append as reference_kv_append

    gen = torch.Generator().manual_seed(2)
    b, hq, hkv, d, t = 2, 4, 2, 16, 8
    q, k, v = (torch.randn(b, h, d, generator=gen, dtype=torch.float64) for h in (hq, hkv, hkv))
    qw, kw = torch.rand(d, generator=gen) + 0.5, torch.rand(d, generator=gen) + 0.5
    k_cache, v_cache = torch.zeros(b, hkv, t, d, dtype=torch.float64), torch.zeros(b, hkv, t, d, dtype=torch.float64)
    got_q = reference_kv_append(q, k, v, k_cache, v_cache, 3, base=100.0, q_norm_weight=qw, k_norm_weight=kw,
                                norm_eps=1e-3)
    # a rotation keeps each pair's length: with unit weights the rotated head's RMS is the normalized one's
    rms = lambda x: x.square().mean(-1).sqrt()  # noqa: E731
    unit = reference_kv_append(q, k, v, k_cache.clone(), v_cache.clone(), 3, base=100.0,
                               q_norm_weight=torch.ones(d), norm_eps=1e-3)
    assert torch.allclose(rms(unit), rms(q) / (rms(q).square() + 1e-3).sqrt())
    # the weights scale the features before the rotation: by hand, feature by feature
    normed = q * torch.rsqrt(q.square().mean(-1, keepdim=True) + 1e-3) * qw.double()
    inv = 100.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = torch.cos(3 * inv), torch.sin(3 * inv)
    x1, x2 = normed[..., : d // 2], normed[..., d // 2:]
    assert torch.allclose(got_q, torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1))
    kn = k * torch.rsqrt(k.square().mean(-1, keepdim=True) + 1e-3) * kw.double()
    k1, k2 = kn[..., : d // 2], kn[..., d // 2:]
    assert torch.allclose(k_cache[:, :, 3], torch.cat((k1 * c - k2 * s, k2 * c + k1 * s), -1))


def test_the_reference_writes_each_new_token_at_its_slot_rotated_at_slot_minus_start():
    import cukiln
    from cukiln.reference import kv_append as reference_kv_append

    gen = torch.Generator().manual_seed(1)
    b, n, hq, hkv, d, t = 3, 2, 4, 2, 32, 10
    q = torch.randn(b, n, hq, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, n, hkv, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, n, hkv, d, generator=gen, dtype=torch.float64)
    k_cache, v_cache = torch.randn(b, hkv, t, d, generator=gen, dtype=torch.float64), torch.zeros(b, hkv, t, d,
                                                                                                   dtype=torch.float64)
    old_k = k_cache.clone()
    lens, start = torch.tensor([0, 4, 9], dtype=torch.int32), torch.tensor([0, 1, 0], dtype=torch.int32)
    # host lengths are checked as the kernels check them: row 2's two tokens do not fit, and nothing is written
    with pytest.raises(ValueError, match="row 2 holds 9 tokens"):
        reference_kv_append(q, k, v, k_cache, v_cache, lens, kv_start=start, base=10000.0)
    assert torch.equal(k_cache, old_k) and not v_cache.any(), "a refused call wrote the caches"
    # lengths only the device knows are not checked: a row that does not fit writes nothing and gets NaN (the
    # reference reads them on the host, as the kernels' device-side checks do)
    from cukiln import calls

    with pytest.MonkeyPatch.context() as patch:  # the device's own view: nothing checked on the host
        patch.setattr(calls.OpRuntime, "validate", lambda *args: None)
        got_q = reference_kv_append(q, k, v, k_cache, v_cache, lens, kv_start=start, base=10000.0)
    for i, (n_i, s_i) in enumerate(((0, 0), (4, 1))):
        for j in range(n):
            pos = torch.tensor([n_i + j - s_i])
            want_k = cukiln.reference.rope(k[i, j][None, None], base=10000.0, positions=pos)[0, 0]
            assert torch.equal(k_cache[i, :, n_i + j], want_k)
            assert torch.equal(v_cache[i, :, n_i + j], v[i, j])
            want_q = cukiln.reference.rope(q[i, j][None, None], base=10000.0, positions=pos)[0, 0]
            assert torch.equal(got_q[i, j], want_q)
    assert torch.equal(k_cache[2], old_k[2]) and not v_cache[2].any(), "the row that does not fit wrote its cache"
    assert torch.isnan(got_q[2]).all()
    untouched = torch.ones(t, dtype=torch.bool)
    untouched[4:6] = False
    assert torch.equal(k_cache[1][:, untouched], old_k[1][:, untouched])


def test_fp8_caches_are_a_run_time_mode_of_the_same_variant_with_their_scales_in_its_fields():
    plain = plan_kv_append(**_call())
    fp8 = plan_kv_append(**_call(k_cache=contiguous((B, HKV, T, D), "e4m3", BASE * 16),
                                 v_cache=contiguous((B, HKV, T, D), "e4m3", BASE * 32), rotary_offset=0,
                                 k_scale=contiguous((HKV,), "fp32", BASE * 128), v_scale=0.25), arch="sm_90")
    assert fp8.symbol == plain.symbol  # no variant of its own: the append is a few blocks either way
    f, g = dict(zip(fp8.field_names, fp8.values)), dict(zip(plain.field_names, plain.values))
    assert (f["cache_fp8"], g["cache_fp8"]) == (1, 0)
    assert (f["k_scale"], f["k_scale_stride"], f["v_scale"], f["v_scale_value"]) == (BASE * 128, 1, 0, 0.25)
    assert (g["k_scale"], g["k_scale_value"], g["v_scale_value"]) == (0, 1.0, 1.0)
    assert ("k_scale", "k_scale", 0) in fp8.pointers and not any(p[0] == "v_scale" for p in fp8.pointers)


def test_fp8_caches_are_refused_where_the_gpu_cannot_write_them_and_beside_a_16_bit_one():
    fp8 = contiguous((B, HKV, T, D), "e4m3", BASE * 16)
    with pytest.raises(ValueError, match="k_cache: FP8 caches are written from sm_89 on"):
        plan_kv_append(**_call(k_cache=fp8, v_cache=contiguous((B, HKV, T, D), "e4m3", BASE * 32)), arch="sm_80")
    with pytest.raises(TypeError, match="k_cache, v_cache: expected one dtype for both"):
        plan_kv_append(**_call(k_cache=fp8), arch="sm_90")
    with pytest.raises(ValueError, match="k_scale: a scale dequantizes an FP8 cache"):
        plan_kv_append(**_call(k_scale=2.0), arch="sm_90")
