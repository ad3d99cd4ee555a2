"""RoPE kernels on the GPU against the float64 reference: every manifest variant, shapes, views, in place.

Inputs are fresh random draws for every check and outputs are NaN-poisoned before each launch, so an
unwritten element fails the comparison.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import native  # noqa: E402
from cukiln.rope_api import plan_call  # noqa: E402
from cukiln.tools.rope.checks import check_rope_variant  # noqa: E402
from tests.checks import assert_matches_reference, manifest_entries  # noqa: E402

pytestmark = pytest.mark.gpu

TORCH_DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("entry", manifest_entries("rope"), ids=lambda e: e["name"])
def test_every_manifest_variant(entry):
    problem = check_rope_variant(entry["axes"], entry["name"])
    assert problem is None, f"{entry['name']}: {problem}"


def _random_case(gen, dev, dtype, S, B, H, D, rd, layout="sbhd"):
    shape = (S, B, H, D) if layout == "sbhd" else (B, S, H, D)
    x = torch.randn(*shape, generator=gen, device=dev).to(dtype)
    freqs = torch.rand(S + 8, 1, 1, rd, generator=gen, device=dev) * 50
    return x, freqs


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("head_dim", [64, 80, 96, 128, 256])
@pytest.mark.parametrize("partial", [False, True])
def test_head_dims_and_partial_rotary(dtype, head_dim, partial):
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.seed()
    rd = head_dim // 2 if partial else head_dim
    if partial and head_dim == 80:
        rd = 24  # rd/2 = 12: vector width 4 for the rotary part, tail of 56
    x, freqs = _random_case(gen, dev, TORCH_DTYPE[dtype], 19, 2, 6, head_dim, rd)
    for backward in (False, True):
        for interleaved in (False, True):
            out = torch.full_like(x, float("nan"))
            kw = dict(freqs=freqs, backward=backward, interleaved=interleaved, offsets=5)
            cukiln.rope(x, out=out, **kw)
            assert_matches_reference(out, cukiln.reference.rope(x, **kw), f"d={head_dim} rd={rd}")


@pytest.mark.parametrize("S,B", [(1, 1), (1, 37), (4099, 1), (4099, 37)])
@pytest.mark.parametrize("layout", ["sbhd", "bshd"])
def test_batch_and_sequence_extremes(S, B, layout):
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.seed()
    x, freqs = _random_case(gen, dev, torch.bfloat16, S, B, 4, 64, 64, layout)
    out = torch.full_like(x, float("nan"))
    cukiln.rope(x, freqs=freqs, layout=layout, out=out)
    assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs, layout=layout), f"S={S} B={B} {layout}")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_transposed_bhsd_view_runs_without_copy(dtype):
    """A (b, h, s, d) tensor seen as (b, s, h, d) through a transpose: 3 strides, no copy, exact."""
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.seed()
    bhsd = torch.randn(3, 8, 129, 128, generator=gen, device=dev).to(TORCH_DTYPE[dtype])
    x = bhsd.transpose(1, 2)
    freqs = torch.rand(200, 128, generator=gen, device=dev) * 50
    plan, _ = plan_call(x, freqs=freqs, layout="bshd")
    assert plan.key[4] == 3 and plan.key[5] == 16 // x.element_size()
    out = torch.full_like(x, float("nan"))
    cukiln.rope(x, freqs=freqs, layout="bshd", out=out)
    assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs, layout="bshd"))
    # In place on the view writes straight into the (b, h, s, d) storage.
    expected = cukiln.reference.rope(x, freqs=freqs, layout="bshd")
    ret = cukiln.rope(x, freqs=freqs, layout="bshd", inplace=True)
    assert ret.data_ptr() == bhsd.data_ptr()
    assert_matches_reference(x, expected)


@pytest.mark.parametrize("interleaved", [False, True])
def test_in_place_touches_only_rotated_features_of_its_heads(interleaved):
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.seed()
    big = torch.randn(64, 2, 12, 128, generator=gen, device=dev).to(torch.bfloat16)
    before = big.clone()
    x = big[:, :, 3:9, :]  # heads 3..8 only
    freqs = torch.rand(64, 32, generator=gen, device=dev) * 20
    expected = cukiln.reference.rope(x, freqs=freqs, interleaved=interleaved)
    cukiln.rope(x, freqs=freqs, interleaved=interleaved, inplace=True)
    assert_matches_reference(x, expected)
    assert torch.equal(big[..., 32:].view(torch.int16), before[..., 32:].view(torch.int16)), "tail changed"
    for heads in (slice(0, 3), slice(9, 12)):
        assert torch.equal(big[:, :, heads].view(torch.int16), before[:, :, heads].view(torch.int16))


@pytest.mark.parametrize("form", ["positions_1d_int32", "positions_2d_int64", "offsets_tensor"])
def test_position_sources(form):
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.seed()
    S, B = 33, 4
    x = torch.randn(B, S, 8, 64, generator=gen, device=dev)
    kw = {"base": 500000.0, "layout": "bshd"}
    if form == "positions_1d_int32":
        kw["positions"] = torch.randint(0, 100000, (S,), generator=gen, device=dev, dtype=torch.int32)
    elif form == "positions_2d_int64":
        kw["positions"] = torch.randint(0, 100000, (B, S), generator=gen, device=dev)
    else:
        kw["offsets"] = torch.randint(0, 100000, (B,), generator=gen, device=dev, dtype=torch.int32)
    out = torch.full_like(x, float("nan"))
    cukiln.rope(x, out=out, **kw)
    assert_matches_reference(out, cukiln.reference.rope(x, **kw), form)


def test_device_positions_outside_the_table_give_nan_rows_and_no_wild_reads():
    dev = torch.device("cuda")
    x = torch.randn(4, 1, 2, 32, device=dev)
    freqs = torch.rand(10, 32, device=dev)
    positions = torch.tensor([0, 9, 10, -1], device=dev)
    out = cukiln.rope(x, freqs=freqs, positions=positions)
    torch.cuda.synchronize()
    assert not torch.isnan(out[:2]).any()
    assert torch.isnan(out[2:]).all()


def test_bad_input_raises_before_anything_is_written():
    dev = torch.device("cuda")
    x = torch.randn(8, 1, 2, 32, device=dev)
    out = torch.full_like(x, float("nan"))
    freqs = torch.rand(8, 32, device=dev)
    with pytest.raises(ValueError, match="positions"):
        cukiln.rope(x, freqs=freqs, offsets=1, out=out)  # positions 1..8 exceed an 8-row table
    with pytest.raises(ValueError, match="out: overlaps x without being exactly x"):
        cukiln.rope(x, freqs=freqs, out=x[1:2].expand(8, 1, 2, 32))
    with pytest.raises(ValueError, match=r"out: written tensor has a broadcast \(stride 0\) dimension"):
        cukiln.rope(x, freqs=freqs, out=torch.empty(1, 1, 2, 32, device=dev).expand(8, 1, 2, 32))
    # only offsets takes an int: an int for a tensor argument is refused, not read as "none given"
    for name, value in (("positions", 5), ("cu_seqlens", 3)):
        with pytest.raises(TypeError, match=f"{name}: expected a torch.Tensor"):
            cukiln.rope(x, freqs=freqs, out=out, **{name: value})
    with pytest.raises(TypeError, match="inv_freq: expected a torch.Tensor"):
        cukiln.rope(x, base=10000.0, inv_freq=2, out=out)
    with pytest.raises(TypeError, match="out: expected float32, float16 or bfloat16, got int32"):
        cukiln.rope(x, freqs=freqs, out=x.view(torch.int32))  # x's memory seen as another dtype
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


def test_more_than_2_31_elements_index_correctly():
    """In place on a 2**31 + 2**22-element bf16 tensor: the last tokens lie past any 32-bit offset."""
    dev = torch.device("cuda")
    free, _ = torch.cuda.mem_get_info()
    S, H, D = 2**14 + 32, 1024, 128  # 2**31 + 2**22 elements, 4.3 GB
    if free < 2 * S * H * D * 2:
        pytest.skip("needs about 9 GB of free GPU memory")
    x = torch.empty(S, 1, H, D, device=dev, dtype=torch.bfloat16)
    x.view(-1)[:: 2**20].normal_()
    x[-3:].normal_()
    x[:2].normal_()
    edges = {"head": x[:2].clone(), "tail": x[-3:].clone()}
    cukiln.rope(x, base=10000.0, inplace=True)
    assert x.numel() > 2**31
    assert_matches_reference(x[:2], cukiln.reference.rope(edges["head"], base=10000.0))
    assert_matches_reference(x[-3:], cukiln.reference.rope(edges["tail"], base=10000.0, offsets=S - 3))
    del x


def test_runs_on_the_current_stream():
    dev = torch.device("cuda")
    x = torch.randn(512, 4, 16, 128, device=dev, dtype=torch.bfloat16)
    freqs = torch.rand(512, 128, device=dev)
    out = torch.empty_like(x)
    cukiln.rope(x, freqs=freqs, out=out)  # the plan: the call below is a hit, the path that serves calls
    out.fill_(float("nan"))
    # the read below, once before the window: its kernels loaded now (a lazy load may synchronize the context)
    assert torch.isnan(out).all().item()
    served = native.module().python_count("rope#out") if native.module() is not None else None
    side = torch.cuda.Stream()  # a non-blocking stream: the default stream does not wait for it
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keep the side stream busy: a launch elsewhere would finish first
        cukiln.rope(x, freqs=freqs, out=out)
        done = torch.cuda.Event()
        done.record(side)
    # read on the default stream while the side one sleeps: a launch on the default stream would have written out
    assert torch.isnan(out).all().item(), "rope ran on another stream than the current one"
    assert not done.query()
    done.synchronize()
    if served is not None:
        assert native.module().python_count("rope#out") == served, "the side stream's call was a hit"
    assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs))


def test_empty_input_launches_nothing():
    x = torch.empty(0, 2, 4, 64, device="cuda")
    plan, out = plan_call(x, base=10000.0)
    assert plan is None and out.shape == x.shape
    assert cukiln.rope(x, base=10000.0).numel() == 0


def test_half_width_cos_sin_cache_matches_full_width():
    dev = torch.device("cuda")
    x = torch.randn(40, 2, 4, 64, device=dev, dtype=torch.float16)
    theta = torch.rand(40, 32, device=dev, dtype=torch.float64) * 10
    half = cukiln.rope(x, cos=theta.cos().half(), sin=theta.sin().half(), rotary_dim=64)
    full_cos, full_sin = torch.cat([theta, theta], -1).cos().half(), torch.cat([theta, theta], -1).sin().half()
    full = cukiln.rope(x, cos=full_cos, sin=full_sin)
    assert torch.equal(half, full)
    assert_matches_reference(full, cukiln.reference.rope(x, cos=full_cos, sin=full_sin), "full-width cos and sin")
    assert math.isfinite(half.float().abs().max().item())
