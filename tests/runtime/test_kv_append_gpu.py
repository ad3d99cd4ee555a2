"""kv_append on the GPU against its float64 reference: every manifest variant (cukiln verify's check: caches holding a
random pattern that must keep its bits outside the appended slots, left padding, a row that does not fit, bhsd and
bshd, in place and out of place, QK-norm), a decode step on slices of a fused projection, host lengths, QK-norm of
Qwen3 shapes, and a 64-step decode loop replayed from one CUDA graph with the lengths advancing on the device."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln.reference import kv_append as reference_kv_append  # noqa: E402
from cukiln.tools.decode.checks import DECODE_FP32_UNITS  # noqa: E402
from cukiln.tools.kv_append.checks import check_variant  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import assert_matches_reference, manifest_entries  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("entry", manifest_entries("kv_append"), ids=lambda e: e["name"])
def test_every_manifest_variant(entry):
    problem = check_variant(entry)
    assert problem is None, f"{entry['name']}: {problem}"


def _decode_step(b=4, hq=32, hkv=8, d=128, T=256, dtype=torch.bfloat16):
    gen = new_generator()
    qkv = torch.randn(b, (hq + 2 * hkv) * d, generator=gen, device="cuda").to(dtype)
    q = qkv[:, : hq * d].view(b, hq, d)
    k = qkv[:, hq * d:(hq + hkv) * d].view(b, hkv, d)
    v = qkv[:, (hq + hkv) * d:].view(b, hkv, d)
    caches = [torch.randn(b, hkv, T + 16, d, generator=gen, device="cuda").to(dtype)[:, :, :T] for _ in range(2)]
    return q, k, v, caches


def test_a_decode_step_on_projection_slices_with_a_cos_sin_cache_and_host_lengths():
    q, k, v, (k_cache, v_cache) = _decode_step()
    angles = torch.arange(512, device="cuda", dtype=torch.float64)[:, None] * (
        1e4 ** (-torch.arange(0, 128, 2, device="cuda", dtype=torch.float64) / 128))
    cache = torch.cat((angles.cos(), angles.sin()), dim=1).float()
    lens = torch.tensor([0, 100, 255, 31], dtype=torch.int32)  # on the CPU: checked, then copied over
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    ref_q = reference_kv_append(q, k, v, ref_k, ref_v, lens, cos_sin_cache=cache)
    got = cukiln.kv_append(q, k, v, k_cache, v_cache, lens, cos_sin_cache=cache)
    assert_matches_reference(got, ref_q, "q")
    assert_matches_reference(k_cache, ref_k, "k_cache")
    assert torch.equal(v_cache, ref_v)


def _qwen3_norm_weights(d=128, dtype=torch.bfloat16):
    gen = new_generator()
    return {f"{t}_norm_weight": (torch.rand(d, generator=gen, device="cuda") + 0.5).to(dtype) for t in "qk"}


@pytest.mark.parametrize("heads", [(32, 8), (64, 8), (16, 16)])
@pytest.mark.parametrize("weight_dtype", [torch.bfloat16, torch.float32])
def test_qk_norm_of_qwen3_shapes_on_projection_slices(heads, weight_dtype):
    hq, hkv = heads
    q, k, v, (k_cache, v_cache) = _decode_step(b=3, hq=hq, hkv=hkv)
    lens = torch.tensor([0, 200, 37], dtype=torch.int32, device="cuda")
    norm = {**_qwen3_norm_weights(dtype=weight_dtype), "norm_eps": 1e-6}
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    ref_q = reference_kv_append(q, k, v, ref_k, ref_v, lens, base=1e6, **norm)
    got = cukiln.kv_append(q, k, v, k_cache, v_cache, lens, base=1e6, **norm)
    assert_matches_reference(got, ref_q, "q")
    assert_matches_reference(k_cache, ref_k, "k_cache")
    assert torch.equal(v_cache, ref_v)


def test_qk_norm_of_one_tensor_alone_and_many_tokens_a_row():
    gen = new_generator()
    b, n, hq, hkv, d, T = 3, 7, 16, 4, 64, 96
    q, k, v = (torch.randn(b, n, h, d, generator=gen, device="cuda").to(torch.float16) for h in (hq, hkv, hkv))
    caches = [torch.randn(b, hkv, T, d, generator=gen, device="cuda").to(torch.float16) for _ in range(2)]
    lens = torch.tensor([0, 50, T - n], dtype=torch.int32, device="cuda")
    w = torch.rand(d, generator=gen, device="cuda") + 0.5
    for norm in ({"k_norm_weight": w}, {"q_norm_weight": w, "k_norm_weight": w, "norm_eps": 0.1}):
        k_cache, v_cache = (c.clone() for c in caches)
        ref_k, ref_v = k_cache.clone(), v_cache.clone()
        ref_q = reference_kv_append(q, k, v, ref_k, ref_v, lens, base=1e4, interleaved=True, **norm)
        got = cukiln.kv_append(q, k, v, k_cache, v_cache, lens, base=1e4, interleaved=True, **norm)
        assert_matches_reference(got, ref_q, f"q with {sorted(norm)}")
        assert_matches_reference(k_cache, ref_k, f"k_cache with {sorted(norm)}")
        assert torch.equal(v_cache, ref_v)


def test_decode_step_with_qk_norm_against_the_reference_eager_compiled_and_in_a_graph():
    import cukiln.torch as ct

    q, k, v, k_cache, v_cache, lens, start = _step_case()
    norm = _qwen3_norm_weights()
    kw = dict(kv_start=start, base=1e6, **norm)
    got = _step_against_the_reference(q, k, v, k_cache, v_cache, lens, kw)
    compiled = torch.compile(lambda *a: ct.decode_step(*a, **kw), fullgraph=True)
    assert torch.equal(compiled(q, k, v, k_cache, v_cache, lens), got)
    out = torch.empty_like(got)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cukiln.decode_step(q, k, v, k_cache, v_cache, lens, out=out, **kw)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        cukiln.decode_step(q, k, v, k_cache, v_cache, lens, out=out, **kw)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, got)


def test_host_lengths_that_do_not_fit_raise_before_anything_is_written():
    q, k, v, (k_cache, v_cache) = _decode_step()
    before = k_cache.clone(), v_cache.clone()
    with pytest.raises(ValueError, match="row 2 holds 256 tokens"):
        cukiln.kv_append(q, k, v, k_cache, v_cache, torch.tensor([0, 1, 256, 3], dtype=torch.int32), base=1e4,
                         inplace=True)
    torch.cuda.synchronize()
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


def _replay_steps(graph, inputs, per_step, result) -> list:
    """Replay ``graph`` once per step with that step's inputs copied into the captured ones: each step's result."""
    outs = []
    for i in range(per_step[0].shape[0]):
        for captured, values in zip(inputs, per_step):
            captured.copy_(values[i])
        graph.replay()
        outs.append(result.clone())
    torch.cuda.synchronize()
    return outs


def test_a_64_step_decode_loop_replays_from_one_cuda_graph():
    q, k, v, (k_cache, v_cache) = _decode_step(b=3, T=128)
    steps = 64
    gen = new_generator()
    new_q = torch.randn(steps, *q.shape, generator=gen, device="cuda").to(q.dtype)
    new_k = torch.randn(steps, *k.shape, generator=gen, device="cuda").to(k.dtype)
    new_v = torch.randn(steps, *v.shape, generator=gen, device="cuda").to(v.dtype)
    start = torch.tensor([0, 3, 10], dtype=torch.int32, device="cuda")
    lens0 = torch.tensor([5, 20, 40], dtype=torch.int32, device="cuda")
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    ref_q = []
    for i in range(steps):  # the reference loop, lengths on the host
        ref_q.append(reference_kv_append(new_q[i], new_k[i], new_v[i], ref_k, ref_v, lens0.cpu() + i,
                                         kv_start=start.cpu(), base=5e5))
    lens = lens0.clone()
    q_in, k_in, v_in = new_q[0].clone(), new_k[0].clone(), new_v[0].clone()
    q_out = torch.empty_like(q_in)
    kw = dict(kv_start=start, base=5e5, out=q_out)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up (plans, bound kernels) outside the capture
        cukiln.kv_append(q_in, k_in, v_in, k_cache.clone(), v_cache.clone(), lens, **kw)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cukiln.kv_append(q_in, k_in, v_in, k_cache, v_cache, lens, **kw)
        lens.add_(1)  # the next step's lengths, on the device
    outs = _replay_steps(graph, (q_in, k_in, v_in), (new_q, new_k, new_v), q_out)
    assert torch.equal(lens, lens0 + steps)
    for i in (0, 1, steps - 1):
        assert_matches_reference(outs[i], ref_q[i], f"q at step {i}")
    assert_matches_reference(k_cache, ref_k, "k_cache after the loop")
    assert torch.equal(v_cache, ref_v)


# --- decode_step: the append, then the attention over the keys including the new one ------------------------------

def _step_case(b=4, T=256):
    q, k, v, (k_cache, v_cache) = _decode_step(b=b, T=T)
    lens = torch.tensor([0, 100, 254, 31][:b], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 7, 3, 0][:b], dtype=torch.int32, device="cuda")
    return q, k, v, k_cache, v_cache, lens, start


def _step_against_the_reference(q, k, v, k_cache, v_cache, lens, append_kw, **attention_kw):
    """One cukiln.decode_step (device lengths) checked in its two parts: the caches against the float64 append, and
    the output against the float64 attention over the query the step attends with. That query is bf16: the kernel
    rounds its fp32 rotation, the reference its float64 one, and where the two straddle a rounding boundary they
    differ by one ulp, which the attention carries past decode's own bound (QK-norm makes such straddles common).
    So the attention's reference takes the kernel's own rotated query (cukiln.kv_append's, on copies of the caches:
    the same rotation), itself checked against the float64 one. Returns the step's result."""
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    ref_q = reference_kv_append(q, k, v, ref_k, ref_v, lens.cpu(), **append_kw)
    q_rot = cukiln.kv_append(q, k, v, k_cache.clone(), v_cache.clone(), lens, **append_kw)
    assert_matches_reference(q_rot, ref_q, "rotated query")
    got = cukiln.decode_step(q, k, v, k_cache, v_cache, lens, **append_kw, **attention_kw)
    assert_matches_reference(k_cache, ref_k, "k_cache")
    assert torch.equal(v_cache, ref_v)
    ref = cukiln.reference.decode_attention(q_rot, k_cache, v_cache, lens + 1, kv_start=append_kw.get("kv_start"),
                                            **attention_kw)
    out = got[0] if attention_kw.get("return_lse") else got
    assert_matches_reference(out, ref[0] if attention_kw.get("return_lse") else ref, "attention output",
                             fp32_units=DECODE_FP32_UNITS)
    return got


def test_decode_step_is_the_append_then_the_attention_over_the_new_length():
    q, k, v, k_cache, v_cache, lens, start = _step_case()
    kw = dict(kv_start=start, inv_freq=1.0 / (1e6 ** (torch.arange(0, 128, 2, device="cuda") / 128.0)))
    got, lse = _step_against_the_reference(q, k, v, k_cache, v_cache, lens, kw, softcap=30.0, return_lse=True)
    assert torch.isfinite(lse).all()
    assert torch.equal(lens, torch.tensor([0, 100, 254, 31], dtype=torch.int32, device="cuda")), "lens changed"


def test_decode_step_validates_the_attention_before_writing_the_caches():
    q, k, v, k_cache, v_cache, lens, start = _step_case()
    before = k_cache.clone()
    with pytest.raises(ValueError, match="num_splits"):
        cukiln.decode_step(q, k, v, k_cache, v_cache, lens, base=1e4, num_splits=0)
    with pytest.raises(ValueError, match="advance_lens"):
        cukiln.decode_step(q, k, v, k_cache, v_cache, 5, base=1e4, advance_lens=True)
    torch.cuda.synchronize()
    assert torch.equal(k_cache, before)


def test_a_repeated_step_still_refuses_an_out_over_a_cache_at_new_addresses():
    q, k, v, k_cache, v_cache, lens, start = _step_case()
    out = torch.empty_like(q)
    for _ in range(2):  # planned, then taken from the plan cache with its overlap checks passed
        cukiln.decode_step(q, k, v, k_cache, v_cache, lens, base=1e4, out=out)
    torch.cuda.synchronize()
    before = k_cache.clone(), v_cache.clone()
    inside = v_cache.as_strided(q.shape, out.stride())  # out's metadata, inside the value cache
    with pytest.raises(ValueError, match="out: overlaps v_cache"):
        cukiln.decode_step(q, k, v, k_cache, v_cache, lens, base=1e4, out=inside)
    torch.cuda.synchronize()
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1]), "a refused step wrote"


def test_a_64_step_decode_step_loop_advances_its_lengths_inside_one_cuda_graph():
    q, k, v, k_cache, v_cache, lens, start = _step_case(b=3, T=128)
    lens.copy_(torch.tensor([5, 20, 40], dtype=torch.int32))
    steps, gen = 64, new_generator()
    new_q = torch.randn(steps, *q.shape, generator=gen, device="cuda").to(q.dtype)
    new_k = torch.randn(steps, *k.shape, generator=gen, device="cuda").to(k.dtype)
    new_v = torch.randn(steps, *v.shape, generator=gen, device="cuda").to(v.dtype)
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    # each step's rotated query as the append stores it (bf16), and the caches the reference appends to
    q_rots = [reference_kv_append(new_q[i], new_k[i], new_v[i], ref_k, ref_v, lens.cpu() + i, kv_start=start,
                                  base=1e4).to(q.dtype) for i in range(steps)]
    lens0 = lens.clone()
    q_in, k_in, v_in = new_q[0].clone(), new_k[0].clone(), new_v[0].clone()
    out = torch.empty_like(q_in)
    kw = dict(kv_start=start, base=1e4, advance_lens=True, out=out)
    warm = lens.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cukiln.decode_step(q_in, k_in, v_in, k_cache.clone(), v_cache.clone(), warm, **kw)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cukiln.decode_step(q_in, k_in, v_in, k_cache, v_cache, lens, **kw)
    outs = _replay_steps(graph, (q_in, k_in, v_in), (new_q, new_k, new_v), out)
    assert lens.tolist() == [5 + steps, 20 + steps, 40 + steps]
    # step i attended to the keys the kernel had written by then, which the final caches still hold (later steps
    # write later slots): the float64 attention over those. The rotated query the step attends with is bf16, and
    # the kernel's (rounded from fp32) may sit one bf16 ulp (2**-8 relative) from the reference's (rounded from
    # float64) where the two straddle a rounding boundary; the attention carries that, so the bound here is
    # 2**-7 of the output's scale rather than decode's own 2-ulp bound (which the one-step test above holds)
    for i in (0, 1, steps // 2, steps - 1):
        ref = cukiln.reference.decode_attention(q_rots[i], k_cache, v_cache, lens0 + i + 1, kv_start=start)
        err = (outs[i].double() - ref).abs().max().item()
        assert torch.isfinite(outs[i]).all() and err <= 2.0**-7 * ref.abs().max().item(), f"step {i}: {err:.3g}"
    assert_matches_reference(k_cache, ref_k, "k_cache after the loop")
    assert torch.equal(v_cache, ref_v)


def test_the_torch_ops_compile_without_graph_breaks_and_match_the_eager_calls():
    import cukiln.torch as ct

    q, k, v, k_cache, v_cache, lens, start = _step_case()
    caches = k_cache.clone(), v_cache.clone()
    kw = dict(kv_start=start, base=1e4)
    want = cukiln.decode_step(q, k, v, *caches, lens.clone(), advance_lens=True, **kw)

    def step(q, k, v, k_cache, v_cache, lens):
        return ct.decode_step(q, k, v, k_cache, v_cache, lens, advance_lens=True, **kw)

    compiled = torch.compile(step, fullgraph=True)
    got = compiled(q, k, v, k_cache, v_cache, lens)
    torch.cuda.synchronize()
    assert torch.equal(got, want) and torch.equal(k_cache, caches[0]) and torch.equal(v_cache, caches[1])
    assert lens.tolist() == [1, 101, 255, 32], "the op did not advance kv_lens"
    q_rot = torch.compile(lambda *a: ct.kv_append(*a, base=1e4), fullgraph=True)(q, k, v, k_cache, v_cache, 3)
    assert torch.equal(q_rot, cukiln.kv_append(q, k, v, caches[0], caches[1], 3, base=1e4))
    assert_matches_reference(q_rot, reference_kv_append(q, k, v, caches[0].clone(), caches[1].clone(), 3, base=1e4),
                             "compiled kv_append's q")
