"""Decode attention on the GPU against the float64 reference: every manifest variant, GQA ratios, layouts,
cache slices, lengths, softcap, lse, CUDA graphs.

Inputs are fresh random draws for every check and outputs are NaN-poisoned before each launch, so an
unwritten element fails the comparison.
"""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import overrides  # noqa: E402
from cukiln.decode_api import plan_call  # noqa: E402
from cukiln.decode_plan import WARP_SPECIALIZED  # noqa: E402
from cukiln.tools.decode.checks import (DECODE_FP32_UNITS, check_decode_variant,  # noqa: E402
                                       decode_cache_view, run_decode_and_compare)
from cukiln.tools.verify import check_entry, new_generator, torch_dtype  # noqa: E402
from tests.checks import assert_matches_reference, manifest_entries, planned_afresh  # noqa: E402

pytestmark = pytest.mark.gpu


def run_and_check(q, k, v, kv_lens, what, **kwargs):
    problem, out, lse = run_decode_and_compare(q, k, v, kv_lens, **kwargs)
    assert problem is None, f"{what}: {problem}"
    return out, lse


@pytest.mark.parametrize("entry", manifest_entries("decode"), ids=lambda e: e["name"])
def test_every_manifest_variant(entry):
    if entry["axes"].get("pipeline") in WARP_SPECIALIZED and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip(f"the {entry['axes']['pipeline']} pipeline needs sm_90 or newer")
    problem = check_decode_variant(entry["axes"], entry["name"])
    assert problem is None, f"{entry['name']}: {problem}"


@pytest.mark.parametrize("entry", manifest_entries("decode_combine"), ids=lambda e: e["name"])
def test_every_combine_kernel_through_a_split_variant(entry):
    problem = check_entry(entry)
    assert problem is None, f"{entry['name']}: {problem}"


@pytest.mark.parametrize("group", [1, 2, 4, 8, 16, 20])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("num_splits", [1, 4, None])
@pytest.mark.parametrize("pipeline", ["narrow", "deep", "wide", "ws", "ws_deep"])
def test_gqa_ratios_layouts_splits_and_pipelines(group, layout, num_splits, pipeline, monkeypatch):
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
    gen = new_generator()
    b, h_kv, T, d = 5, 2, 1000, 128
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, torch.bfloat16, gen, layout=layout, capacity=1536) for _ in range(2))
    lens = torch.randint(1, T + 1, (b,), generator=gen, device="cuda", dtype=torch.int32)
    lens[0], lens[1] = 1, T
    assert plan_call(q, k, v, lens, kv_layout=layout, num_splits=num_splits).pipeline == pipeline
    with planned_afresh("decode_attention#out"):  # this pipeline's plan, not one an earlier pipeline's test left
        run_and_check(q, k, v, lens, f"group {group} {layout}, {pipeline} pipeline", kv_layout=layout,
                      num_splits=num_splits)


@pytest.mark.parametrize("d", [64, 80, 96, 128, 192, 256])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_head_dims_with_left_padding_and_softcap(d, dtype):
    gen = new_generator()
    b, h_kv, group, T = 4, 1, 3, 517
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(torch_dtype(dtype)) * 3
    k, v = (decode_cache_view(b, h_kv, T, d, torch_dtype(dtype), gen) for _ in range(2))
    lens = torch.tensor([517, 300, 2, 64], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 299, 1, 63], dtype=torch.int32, device="cuda")
    for splits in (1, 5):
        run_and_check(q, k, v, lens, f"d{d} softcap", kv_start=start, softcap=20.0, num_splits=splits)
        run_and_check(q, k, v, 400, f"d{d} int len", kv_start=7, scale=0.3, num_splits=splits)


@pytest.mark.parametrize("offset", [1, 2, 4])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_contiguous_caches_off_16_byte_boundaries_take_the_general_kernel(offset, layout):
    # views a few elements into their buffer: rows 2-, 4- or 8-byte aligned, served element by element
    gen = new_generator()
    b, h_kv, group, T, d = 3, 2, 4, 300, 128
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, torch.bfloat16, gen, layout=layout, offset=offset) for _ in range(2))
    lens = torch.tensor([T, 1, 177], dtype=torch.int32, device="cuda")
    for splits in (1, 3):
        plan = plan_call(q, k, v, lens, kv_layout=layout, num_splits=splits)
        assert plan.attention.symbol == f"decode_bf16_d{d}_s4_v1", plan.attention.symbol
        run_and_check(q, k, v, lens, f"offset {offset} {layout}, {splits} splits", kv_layout=layout,
                      num_splits=splits)


@pytest.mark.parametrize("group", [1, 3, 8, 9])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("pipeline", WARP_SPECIALIZED)
def test_ws_both_tile_forms_with_left_padding_and_softcap(pipeline, group, d, dtype, monkeypatch):
    """The ws pipelines compute groups of 8 heads or fewer with keys as the mma's rows, larger ones with heads as
    rows (9: a block of 9 heads): both forms, both head dims they take, partial tiles, softcap, splits."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the ws pipelines need sm_90 or newer")
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
    gen = new_generator()
    b, h_kv, T = 4, 2, 517
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(torch_dtype(dtype)) * 3
    k, v = (decode_cache_view(b, h_kv, T, d, torch_dtype(dtype), gen) for _ in range(2))
    lens = torch.tensor([517, 300, 2, 64], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 299, 1, 63], dtype=torch.int32, device="cuda")
    for splits in (1, 5):
        run_and_check(q, k, v, lens, f"ws d{d} group {group} softcap", kv_start=start, softcap=20.0,
                      num_splits=splits)
        run_and_check(q, k, v, 400, f"ws d{d} group {group} int len", kv_start=7, scale=0.3, num_splits=splits)


@pytest.mark.parametrize("group", [4, 12])
def test_ws_deep_gives_the_bits_of_ws(group):
    """ws_deep is the ws kernel with a deeper ring: the same tiles in the same order, so the same bits, over one pass,
    splits merged in a cluster and by the combine kernel, both tile forms, and rows of every length."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the ws pipelines need sm_90 or newer")
    gen = new_generator()
    b, h_kv, T, d = 3, 2, 3000, 128
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, torch.bfloat16, gen, capacity=3100) for _ in range(2))
    lens = torch.tensor([3000, 1, 1717], dtype=torch.int32, device="cuda")
    for splits in (1, 4, 16):
        results = []
        for pipeline in WARP_SPECIALIZED:
            with overrides.forced("decode_pipeline", pipeline):
                assert plan_call(q, k, v, lens, num_splits=splits).pipeline == pipeline
                results.append(cukiln.decode_attention(q, k, v, lens, num_splits=splits, return_lse=True))
        (out_a, lse_a), (out_b, lse_b) = results
        assert torch.equal(out_a, out_b) and torch.equal(lse_a, lse_b), f"{splits} splits"
        assert torch.isfinite(out_a).all()


@pytest.mark.parametrize("shape", ["bhd", "b1hd", "bh1d", "transposed"])
def test_query_forms_and_non_contiguous_q(shape):
    gen = new_generator()
    b, h, d, T = 3, 8, 128, 200
    base = torch.randn(h, b, 2 * d, generator=gen, device="cuda").to(torch.float16)
    q = base[..., :d].transpose(0, 1)  # [b, h, d], not contiguous
    if shape == "b1hd":
        q = q.unsqueeze(1)
    elif shape == "bh1d":
        q = q.unsqueeze(2)
    elif shape == "transposed":
        q = q.contiguous().transpose(0, 1).contiguous().transpose(0, 1)
    k, v = (decode_cache_view(b, 2, T, d, torch.float16, gen) for _ in range(2))
    out, _ = run_and_check(q, k, v, T, shape)
    assert out.shape == q.shape


@pytest.mark.parametrize("pipeline", ["auto", "ws"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_unattended_cache_slots_may_hold_nan_and_inf(layout, pipeline, monkeypatch):
    # Slots before kv_start or past kv_lens (uninitialized memory, a previous sequence) are never used:
    # with NaN / Inf there, the output still matches the reference on clean data (the ws pipeline's tiles
    # bring such slots into shared memory whole: the V rows past a row's keys are zeroed there).
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
    gen = new_generator()
    b, h_kv, T, d = 4, 2, 300, 128
    q = torch.randn(b, 4 * h_kv, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(b, h_kv, T, d, torch.bfloat16, gen, layout=layout) for _ in range(2))
    lens = torch.tensor([300, 1, 77, 130], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 0, 10, 129], dtype=torch.int32, device="cuda")
    clean = [cache.clone() for cache in (k, v)]
    t = torch.arange(T, device="cuda")
    outside = (t < start[:, None]) | (t >= lens[:, None])  # [b, T]
    mask = outside[:, None, :, None] if layout == "bhsd" else outside[:, :, None, None]
    for cache, poison in ((k, float("nan")), (v, float("inf"))):
        cache.copy_(torch.where(mask, torch.full_like(cache, poison), cache))
    for splits in (1, 4):
        out, lse = cukiln.decode_attention(q, k, v, lens, kv_start=start, kv_layout=layout, num_splits=splits,
                                           return_lse=True)
        ref, ref_lse = cukiln.reference.decode_attention(q, *clean, lens, kv_start=start, kv_layout=layout,
                                                         return_lse=True)
        assert torch.isfinite(out).all(), f"{splits} splits: a poisoned slot reached the output"
        assert_matches_reference(out, ref, f"poisoned slots, {splits} splits", fp32_units=DECODE_FP32_UNITS)
        assert torch.allclose(lse.double(), ref_lse, rtol=1e-5, atol=1e-5)


def test_empty_rows_give_zeros_and_minus_inf():
    gen = new_generator()
    q = torch.randn(3, 4, 64, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(3, 2, 50, 64, torch.bfloat16, gen) for _ in range(2))
    lens = torch.tensor([0, 50, 10], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 50, 3], dtype=torch.int32, device="cuda")
    for splits in (1, 3):
        out, lse = run_and_check(q, k, v, lens, "empty rows", kv_start=start, num_splits=splits)
        assert torch.equal(out[:2], torch.zeros_like(out[:2]))
        assert torch.isneginf(lse[:2]).all()


def test_an_empty_cache_gives_zeros_and_minus_inf_under_the_tuned_rule():
    gen = new_generator()
    q = torch.randn(3, 8, 128, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(3, 2, 64, 128, generator=gen, device="cuda").to(torch.bfloat16)[:, :, :0] for _ in range(2))
    out, lse = run_and_check(q, k, v, 0, "a cache of no positions")  # the split count from the dispatch table
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()


def test_nan_in_a_query_head_makes_that_head_nan():
    # NaN logits are passed over by the running maxima (fmaxf), so the merges must carry them through the
    # sums: one pass, splits merged in a cluster and splits merged by the combine kernel alike.
    gen = new_generator()
    q = torch.randn(3, 8, 128, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(3, 2, 700, 128, torch.bfloat16, gen) for _ in range(2))
    q[1, 5, 17] = float("nan")
    nan = torch.zeros(3, 8, dtype=torch.bool, device="cuda")
    nan[1, 5] = True
    ref = cukiln.reference.decode_attention(q, k, v, 700)
    assert torch.equal(torch.isnan(ref).all(-1), nan), "the reference: NaN in exactly that head"
    for splits in (1, 4, 20):
        out, lse = cukiln.decode_attention(q, k, v, 700, num_splits=splits, return_lse=True)
        assert torch.equal(torch.isnan(out).all(-1), nan) and torch.equal(torch.isnan(lse), nan), f"{splits} splits"
        assert_matches_reference(out[~nan], ref[~nan], f"the other heads, {splits} splits",
                                 fp32_units=DECODE_FP32_UNITS)


def test_out_of_range_device_lengths_give_nan_rows():
    gen = new_generator()
    q = torch.randn(4, 2, 64, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(4, 1, 50, 64, torch.bfloat16, gen) for _ in range(2))
    lens = torch.tensor([51, -1, 10, 20], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 0, 11, 5], dtype=torch.int32, device="cuda")
    for splits in (1, 3):
        out, lse = cukiln.decode_attention(q, k, v, lens, kv_start=start, num_splits=splits, return_lse=True)
        assert torch.isnan(out[:3]).all() and torch.isnan(lse[:3]).all(), "malformed rows must be NaN"
        ref = cukiln.reference.decode_attention(q[3:], k[3:], v[3:], 20, kv_start=5)
        assert_matches_reference(out[3:], ref, "the well-formed row", fp32_units=DECODE_FP32_UNITS)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, kv_start=start, return_lse=True)
    assert torch.isnan(ref[:3]).all() and torch.isnan(ref_lse[:3]).all() and not torch.isnan(ref[3]).any(), \
        "the reference marks the malformed rows as the kernel does"


def test_host_lengths_are_checked_and_copied():
    gen = new_generator()
    q = torch.randn(2, 2, 64, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(2, 1, 50, 64, torch.bfloat16, gen) for _ in range(2))
    with pytest.raises(ValueError, match="kv_lens"):
        cukiln.decode_attention(q, k, v, torch.tensor([51, 3], dtype=torch.int32))
    with pytest.raises(ValueError, match="kv_start"):
        cukiln.decode_attention(q, k, v, torch.tensor([5, 3], dtype=torch.int32),
                                kv_start=torch.tensor([0, 4], dtype=torch.int32))
    run_and_check(q, k, v, torch.tensor([50, 3], dtype=torch.int32), "host lengths")


def test_bad_inputs_raise_before_launch():
    gen = new_generator()
    q = torch.randn(2, 4, 64, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(2, 2, 50, 64, torch.bfloat16, gen) for _ in range(2))
    out = torch.full_like(q, 7.0)
    with pytest.raises(TypeError, match="q's dtype"):
        cukiln.decode_attention(q, k.half(), v, 10, out=out)
    with pytest.raises(ValueError, match="multiple"):
        cukiln.decode_attention(q[:, :3], k, v, 10, out=out[:, :3])
    with pytest.raises(ValueError, match="head dim 48"):
        cukiln.decode_attention(q[..., :48], k[..., :48], v[..., :48], 10)
    with pytest.raises(ValueError, match="kv_lens"):
        cukiln.decode_attention(q, k, v, 51, out=out)
    with pytest.raises(ValueError, match="CUDA tensor"):
        cukiln.decode_attention(q, k.cpu(), v, 10, out=out)
    with pytest.raises(ValueError, match="overlaps"):
        cukiln.decode_attention(q, k, v, 10, out=q)
    assert (out == 7.0).all(), "a rejected call wrote out"


def test_more_than_2_31_elements_index_correctly():
    gen = new_generator()
    b, h_kv, T, d = 1, 8, 2**21 + 64, 128  # each cache holds more than 2**31 elements
    k, v = (torch.empty(b, h_kv, T, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    tail = slice(T - 300, T)
    for t in (k, v):
        t[:, :, tail].copy_(torch.randn(b, h_kv, 300, d, generator=gen, device="cuda"))
    q = torch.randn(b, 4 * h_kv, d, generator=gen, device="cuda").to(torch.bfloat16)
    run_and_check(q, k, v, T, "beyond 2**31", kv_start=T - 300, num_splits=2)


def test_decode_step_captures_into_a_cuda_graph():
    """rope on q and k, then decode attention over the cache: captured once, replayed on new inputs."""
    gen = new_generator()
    b, h_q, h_kv, d, capacity = 4, 16, 4, 128, 1024
    k_buf = torch.randn(b, h_kv, capacity, d, generator=gen, device="cuda").to(torch.bfloat16)
    v_buf = torch.randn(b, h_kv, capacity, d, generator=gen, device="cuda").to(torch.bfloat16)
    q = torch.empty(b, h_q, d, device="cuda", dtype=torch.bfloat16)
    k_new = torch.empty(b, h_kv, d, device="cuda", dtype=torch.bfloat16)
    lens = torch.empty(b, dtype=torch.int32, device="cuda")
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    positions = torch.empty(b, 1, dtype=torch.int64, device="cuda")
    rows = torch.arange(b, device="cuda")

    def step():
        # q, k_new as bshd [b, 1, h, d]: the token's position per row.
        cukiln.rope(q.unsqueeze(1), inv_freq=inv_freq, positions=positions, layout="bshd", inplace=True)
        cukiln.rope(k_new.unsqueeze(1), inv_freq=inv_freq, positions=positions, layout="bshd", inplace=True)
        k_buf[rows, :, positions[:, 0]] = k_new  # the new key joins the cache at its position
        return cukiln.decode_attention(q, k_buf, v_buf, lens, num_splits=8)

    def fill():
        q.copy_(torch.randn(b, h_q, d, generator=gen, device="cuda"))
        k_new.copy_(torch.randn(b, h_kv, d, generator=gen, device="cuda"))
        lens.copy_(torch.randint(1, capacity + 1, (b,), generator=gen, device="cuda"))
        positions.copy_(lens.long().unsqueeze(1) - 1)

    fill()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up: loads the modules outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    fill()
    with torch.cuda.graph(graph):
        out = step()
    for _ in range(3):
        fill()
        q0, k0, lens0, pos0 = q.clone(), k_new.clone(), lens.clone(), positions.clone()
        graph.replay()
        torch.cuda.synchronize()
        q_ref = cukiln.reference.rope(q0.unsqueeze(1), inv_freq=inv_freq, positions=pos0, layout="bshd")[:, 0]
        k_ref = cukiln.reference.rope(k0.unsqueeze(1), inv_freq=inv_freq, positions=pos0, layout="bshd")[:, 0]
        assert_matches_reference(q, q_ref, "rope on q in the graph")
        assert_matches_reference(k_new, k_ref, "rope on k in the graph")
        assert torch.equal(k_buf[rows, :, pos0[:, 0]], k_new), "the graph wrote the rotated key into the cache"
        ref = cukiln.reference.decode_attention(q, k_buf, v_buf, lens0)
        assert_matches_reference(out, ref, "decode attention in the graph", fp32_units=DECODE_FP32_UNITS)


def test_repeated_calls_take_the_cached_plan_with_this_calls_pointers_and_lengths():
    """One shape, many calls: the plan cache's hit path refills the tensors' pointers and the integer lengths
    (checked against the capacity on every call), and each result matches the reference."""
    from cukiln import decode_api, native

    def plans() -> int:  # where the plans live: the native hot path's, else the Python path's
        runtime = decode_api.RUNTIME
        if native.module() is None:
            return len(runtime.plans)
        return sum(native.module().plan_count(variant) for variant in runtime.load_native())

    gen = new_generator()
    q_sets = [torch.randn(2, 8, 128, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3)]
    caches = [tuple(decode_cache_view(2, 2, 256, 128, torch.bfloat16, gen) for _ in range(2)) for _ in range(3)]
    before = plans()
    for q, (k, v), length in zip(q_sets, caches, (256, 1, 97)):
        for splits in (None, 20):  # the tuned plan, and one merged by the combine kernel
            problem = run_decode_and_compare(q, k, v, length, num_splits=splits)[0]
            assert problem is None, (length, splits, problem)
    assert plans() - before == 2, "one plan per distinct call metadata, not per call"
    cukiln.decode_attention(q_sets[0], *caches[0], 256)
    with pytest.raises(ValueError, match="kv_lens: expected 0 <= kv_lens <= T = 256"):
        cukiln.decode_attention(q_sets[0], *caches[0], 257)  # a hit: the length is still checked
    out = torch.empty_like(q_sets[0])
    cukiln.decode_attention(q_sets[0], *caches[0], 256, out=out)
    with pytest.raises(ValueError, match="out: overlaps q"):
        cukiln.decode_attention(q_sets[0], *caches[0], 256, out=q_sets[0])  # same metadata as out: a hit


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9,
                    reason="the ws pipeline needs sm_90 or newer")
def test_ws_tensor_maps_follow_each_calls_caches(monkeypatch):
    """One cached ws plan, caches at other addresses call after call (the tensor maps are kept by pointer)."""
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", "ws")
    gen = new_generator()
    b, h_kv, T, d = 3, 2, 700, 128
    q = torch.randn(b, 4 * h_kv, d, generator=gen, device="cuda").to(torch.float16)
    caches = [tuple(decode_cache_view(b, h_kv, T, d, torch.float16, gen, capacity=800) for _ in range(2))
              for _ in range(3)]
    lens = torch.tensor([700, 5, 333], dtype=torch.int32, device="cuda")
    for k, v in caches + caches[::-1]:
        assert plan_call(q, k, v, lens).pipeline == "ws"
        run_and_check(q, k, v, lens, "ws over caches at new addresses", num_splits=None)


@pytest.mark.parametrize("entry", manifest_entries("decode_merge"), ids=lambda e: e["name"])
def test_every_merge_kernel(entry):
    from cukiln.tools.decode.checks import check_merge_variant

    problem = check_merge_variant(entry["axes"]["dtype"], entry["name"])
    assert problem is None, f"{entry['name']}: {problem}"


def test_merge_attention_of_split_decodes_equals_decode_over_the_whole_cache():
    gen = new_generator()
    q = torch.randn(4, 16, 128, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (decode_cache_view(4, 2, 3000, 128, torch.bfloat16, gen) for _ in range(2))
    cuts = (0, 700, 700, 2100, 3000)  # an empty part among them
    parts = [cukiln.decode_attention(q, k[:, :, a:b], v[:, :, a:b], b - a, return_lse=True)
             for a, b in zip(cuts, cuts[1:])]
    got, lse = cukiln.merge_attention(torch.stack([o for o, _ in parts]), torch.stack([s for _, s in parts]),
                                      return_lse=True)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, 3000, return_lse=True)
    # each part's output is rounded to bf16 before the merge (at most half a bf16 ulp: bf16's unit roundoff 2^-8 of the
    # element, 8 significant bits), and the merge weights sum to 1: an element is off by at most 2^-8 of the largest
    # part element of its head, plus the merged output's own rounding (2^-8 of itself)
    largest = torch.stack([o for o, _ in parts]).double().abs().amax(dim=(0, 3), keepdim=True)[0]
    bound = 2.0 ** -8 * (largest + ref.abs()) + 1e-6
    assert ((got.double() - ref).abs() <= bound).all(), ((got.double() - ref).abs() / bound).max().item()
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)
