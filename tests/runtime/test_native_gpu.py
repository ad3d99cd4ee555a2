"""The native hot path on the GPU: a plan made on one call serves later calls with other tensors of the same
metadata (their results against the float64 reference, outputs poisoned first), and what a plan cannot serve goes
back to Python, which raises: lengths out of range, an output over an input."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
import cukiln.torch  # noqa: E402,F401
from cukiln import native  # noqa: E402

from ..checks import assert_matches_reference  # noqa: E402

pytestmark = [pytest.mark.gpu,  # without a GPU, skipped by tests/conftest.py
              pytest.mark.skipif(torch.cuda.is_available() and native.module() is None,
                                 reason="the native hot path is off")]


def _poisoned(like):
    return torch.full_like(like, float("nan"))


def test_plans_serve_new_tensors_of_the_same_metadata():
    freqs = torch.rand(64, 64, device="cuda")
    before = native.module().plan_count("rope")
    served = {v: native.module().python_count(v) for v in ("rope", "rope#out")}
    for _ in range(3):  # a miss, then hits with new tensors
        x = torch.randn(64, 2, 4, 64, device="cuda", dtype=torch.bfloat16)
        out = _poisoned(x)
        got = cukiln.rope(x, freqs=freqs, out=out)
        assert got is out
        assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs), "rope out=")
        y = cukiln.torch.rope(x, freqs=freqs)
        assert_matches_reference(y, cukiln.reference.rope(x, freqs=freqs), "cukiln.torch.rope")
    assert native.module().plan_count("rope") == before + 1, "one plan for the op's three calls"
    # and hits, not calls Python served without keeping a plan (out=: a miss, where no test before made its plan)
    assert native.module().python_count("rope") == served["rope"] + 1
    assert native.module().python_count("rope#out") <= served["rope#out"] + 1


def test_decode_lengths_refilled_per_call_and_checked():
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 256, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    name = "decode_attention" + native.NO_LSE  # the public call's variant (no out given, no lse asked for)
    before, served = native.module().plan_count(name), native.module().python_count(name)
    for length in (100, 37, 256, 1):  # one plan: each call's length written into its launch
        got = cukiln.decode_attention(q, k, v, length)
        assert_matches_reference(got, cukiln.reference.decode_attention(q, k, v, length), f"decode at {length}")
    assert native.module().plan_count(name) == before + 1, "one plan for the four lengths"
    assert native.module().python_count(name) == served + 1, "Python served the first length alone"
    with pytest.raises(ValueError, match="kv_lens"):
        cukiln.decode_attention(q, k, v, 257)  # past the capacity: the plan's bound sends it back to Python
    with pytest.raises(ValueError, match="kv_start"):
        cukiln.decode_attention(q, k, v, 10, kv_start=11)


def test_an_output_over_an_input_is_refused_on_a_hit():
    x = torch.randn(64, 2, 4, 64, device="cuda", dtype=torch.float16)
    cukiln.rope(x, base=10000.0, out=torch.empty_like(x))  # the plan
    base = torch.empty(2 * x.numel(), device="cuda", dtype=x.dtype)
    shared_x, shared_out = base[:x.numel()].view_as(x), base[x.numel() // 2:][:x.numel()].view_as(x)
    shared_x.copy_(x)
    served = native.module().python_count("rope#out")
    cukiln.rope(shared_x, base=10000.0, out=torch.empty_like(x))  # apart: a hit, so these views key that plan
    assert native.module().python_count("rope#out") == served
    with pytest.raises(ValueError, match="out: overlaps x"):
        cukiln.rope(shared_x, base=10000.0, out=shared_out)


def test_in_place_writes_bump_the_version_as_torch_does():
    x = torch.randn(8, 1, 2, 64, device="cuda")
    for _ in range(2):
        version = x._version
        cukiln.torch.rope(x, base=10000.0, inplace=True)
        assert x._version == version + 1


def test_inference_tensors_are_written_on_a_hit_too():
    # serving stacks allocate caches under inference mode; an inference tensor has no version counter to bump
    x = torch.randn(8, 1, 2, 64, device="cuda")
    expected = cukiln.reference.rope(x, base=10000.0)
    calls = [(cukiln.torch.rope, True), (cukiln.rope, True),
             (cukiln.rope, False)]  # the public call also outside inference mode, as its Python path allows
    served = native.module().python_count("rope_")
    for rope, inside in calls:
        for _ in range(2):  # a miss, then a hit
            with torch.inference_mode():
                y = x.clone()
            with torch.inference_mode(inside):
                rope(y, base=10000.0, inplace=True)
            assert y.is_inference()
            assert_matches_reference(y, expected, f"{rope.__module__}.rope on an inference tensor ({inside})")
    # after the first call (a miss, where no test before made the plan) every call a hit
    assert native.module().python_count("rope_") <= served + 1, "an inference tensor sent a call back to Python"


@pytest.mark.parametrize("form", ["allocates", "out", "inplace"])
def test_kv_append_public_calls_hit_their_plans_with_new_tensors(form):
    from cukiln.reference import kv_append as reference_kv_append

    b, hq, hkv, d, T = 3, 8, 2, 128, 64
    table = torch.rand(T, d, device="cuda")
    name = "kv_append" + {"allocates": "", "out": "#out", "inplace": "#inplace"}[form] + "#lens_out"  # its variant
    before, served = native.module().plan_count(name), native.module().python_count(name)
    for step in range(3):  # a miss, then hits: new tensors and lengths each time, one plan
        q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k_cache, v_cache = (torch.randn(b, hkv, T, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.tensor([step, 10 + step, T - 1], dtype=torch.int32, device="cuda")
        ref_k, ref_v, ref_lens = k_cache.clone(), v_cache.clone(), torch.empty_like(lens)
        expected = reference_kv_append(q, k, v, ref_k, ref_v, lens, cos_sin_cache=table, kv_lens_out=ref_lens)
        lens_out = torch.full_like(lens, -7)
        out = _poisoned(q) if form == "out" else None
        source = q.clone()
        got = cukiln.kv_append(source, k, v, k_cache, v_cache, lens, cos_sin_cache=table, kv_lens_out=lens_out,
                               inplace=form == "inplace", out=out)
        if form != "allocates":
            assert got is (source if form == "inplace" else out)
        assert_matches_reference(got, expected, f"kv_append ({form}) q, step {step}")
        assert_matches_reference(k_cache, ref_k, f"kv_append ({form}) k_cache, step {step}")
        assert torch.equal(v_cache, ref_v) and torch.equal(lens_out, ref_lens)
    assert native.module().plan_count(name) == before + 1, "one plan served the three calls"
    assert native.module().python_count(name) == served + 1, "Python served the miss alone"


def test_a_hit_allocates_from_torchs_allocator_and_frees_its_scratch():
    # outputs come from the allocator torch's own tensors come from (its statistics see them), and a split
    # decode's scratch (one allocation for the partial results) is returned once the call has queued its kernels
    x = torch.randn(64, 2, 4, 64, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(64, 64, device="cuda")
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty_like(q)
    for _ in range(2):  # the misses, then the hits measured below
        cukiln.rope(x, freqs=freqs)
        cukiln.decode_attention(q, k, v, 4000, num_splits=8, out=out)
    torch.cuda.synchronize()
    variants = ("rope", "decode_attention#out#no_lse")  # the public calls' plans
    served = [native.module().python_count(v) for v in variants]
    before = torch.cuda.memory_allocated()
    y = cukiln.rope(x, freqs=freqs)
    assert torch.cuda.memory_allocated() - before == (y.nbytes + 511) // 512 * 512
    del y
    cukiln.decode_attention(q, k, v, 4000, num_splits=8, out=out)
    assert torch.cuda.memory_allocated() == before, "the split results' scratch went back to the allocator"
    assert [native.module().python_count(v) for v in variants] == served, "both were hits (Python allocates alike)"
    assert_matches_reference(out, cukiln.reference.decode_attention(q, k, v, 4000), "split decode on a hit")


def test_kv_append_int_lengths_share_one_plan_and_are_checked_on_a_hit():
    from cukiln.reference import kv_append as reference_kv_append

    b, hq, hkv, d, T = 2, 8, 2, 128, 32
    table = torch.rand(T, d, device="cuda")
    k_cache, v_cache = (torch.randn(b, hkv, T, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    before, served = native.module().plan_count("kv_append"), native.module().python_count("kv_append")
    for length in (0, 1, 2, 7, T - 1):  # a generation loop with its length as an int: one plan, refilled per call
        q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        expected = reference_kv_append(q, k, v, ref_k, ref_v, length, cos_sin_cache=table)
        got = cukiln.kv_append(q, k, v, k_cache, v_cache, length, cos_sin_cache=table)
        assert_matches_reference(got, expected, f"kv_append q at length {length}")
        assert_matches_reference(k_cache, ref_k, f"kv_append k_cache at length {length}")
        assert torch.equal(v_cache, ref_v)
    assert native.module().plan_count("kv_append") == before + 1
    assert native.module().python_count("kv_append") == served + 1, "Python served the first length alone"
    written = k_cache.clone()
    with pytest.raises(ValueError, match="kv_lens"):  # past the capacity: back to Python, which raises
        cukiln.kv_append(q, k, v, k_cache, v_cache, T, cos_sin_cache=table)
    assert torch.equal(k_cache, written), "nothing written"


def test_specialized_ops_run_the_ops_plans_and_autograd():
    from cukiln import rope_api, specialize

    x = torch.randn(64, 2, 4, 64, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(80, 64, device="cuda") * 50
    args = rope_api.arguments(x, freqs=freqs, offsets=7)[0]
    op, given = specialize.specialization("rope", args)
    want = cukiln.reference.rope(x, freqs=freqs, offsets=7)
    assert_matches_reference(torch.ops.cukiln.rope.default(*args), want, "the op")
    before, served = native.module().plan_count("rope"), native.module().python_count("rope")
    for _ in range(2):  # C++: the constants put back, the op's plan hit
        got = op(*given)
        assert_matches_reference(got, want, "the specialized op")
    assert native.module().plan_count("rope") == before, "no plan of its own"
    assert native.module().python_count("rope") == served, "both calls hit in C++"
    x.requires_grad_(True)  # the op's autograd kernel, on the op's arguments
    y = op(x, freqs, *given[2:])
    grad = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, grad)
    assert torch.equal(gx, cukiln.rope(grad, freqs=freqs, offsets=7, backward=True))
    with pytest.raises(TypeError, match="freqs: expected float32"):  # and its errors
        op(x.detach(), freqs.half(), *given[2:])


def test_a_compiled_step_through_its_specialized_op_matches_the_eager_step():
    from torch._inductor.utils import run_and_get_code

    from cukiln.tools.decode_step import bench as decode_step_bench

    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 2, 64)
    names = ("q", "k", "v", "k_cache", "v_cache", "lens")
    eager = {n: s[n].clone() for n in names}
    want = cukiln.torch.decode_step(*eager.values(), cos_sin_cache=s["cos_sin"], advance_lens=True)
    step = torch.compile(lambda *t: cukiln.torch.decode_step(*t, cos_sin_cache=s["cos_sin"], advance_lens=True),
                         fullgraph=True)
    got, (code, *_) = run_and_get_code(step, *(s[n] for n in names))
    assert "torch.ops.cukiln.decode_step__" in code and "cukiln.decode_step.default" not in code
    assert torch.equal(got, want)
    for n in names:
        assert torch.equal(s[n], eager[n]), f"{n} as the eager step left it"


def test_compiled_attention_without_lse_runs_the_variant_that_makes_none():
    # a compiled call not asking for lse takes a specialized op returning out alone (the no-lse variant's plans);
    # asked for, lse comes back as the eager call gives it; both outputs against the float64 reference
    from torch._inductor.utils import run_and_get_code

    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 301, 128, device="cuda", dtype=torch.bfloat16)  # a cache no other test plans for
    v = torch.randn_like(k)
    lens = torch.tensor([301, 17], device="cuda", dtype=torch.int32)
    want_out, want_lse = cukiln.torch.decode_attention(q, k, v, lens, return_lse=True)
    alone = torch.compile(lambda q: cukiln.torch.decode_attention(q, k, v, lens), fullgraph=True)
    both = torch.compile(lambda q: cukiln.torch.decode_attention(q, k, v, lens, return_lse=True), fullgraph=True)
    before = native.module().plan_count("decode_attention#no_lse")
    out, (code, *_) = run_and_get_code(alone, q)
    assert "torch.ops.cukiln.decode_attention__" in code
    assert native.module().plan_count("decode_attention#no_lse") == before + 1, "the variant planned the call"
    served = native.module().python_count("decode_attention#no_lse")
    for _ in range(2):  # a hit after the miss
        got = alone(q)
        assert torch.equal(got, want_out)
    assert native.module().python_count("decode_attention#no_lse") == served, "both compiled calls hit in C++"
    got_out, got_lse = both(q)
    assert torch.equal(out, want_out) and torch.equal(got_out, want_out) and torch.equal(got_lse, want_lse)
    assert_matches_reference(out, cukiln.reference.decode_attention(q, k, v, lens), "compiled decode, no lse")


def test_a_compiled_step_with_and_without_lse_matches_the_eager_step():
    # the step's two specializations: out alone (the no-lse variant's plans) and (out, lse); each compiled step
    # appends a token, so each runs on its own copy of the caches and lengths, against an eager step on another
    from cukiln.tools.decode_step import bench as decode_step_bench

    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 2, 64)
    names = ("q", "k", "v", "k_cache", "v_cache", "lens")

    def fresh():
        return [s[n].clone() for n in names]

    want_out, want_lse = cukiln.torch.decode_step(*fresh(), cos_sin_cache=s["cos_sin"], return_lse=True)
    alone = torch.compile(lambda *t: cukiln.torch.decode_step(*t, cos_sin_cache=s["cos_sin"]), fullgraph=True)
    both = torch.compile(lambda *t: cukiln.torch.decode_step(*t, cos_sin_cache=s["cos_sin"], return_lse=True),
                         fullgraph=True)
    got = alone(*fresh())
    got_out, got_lse = both(*fresh())
    assert torch.equal(got, want_out) and torch.equal(got_out, want_out) and torch.equal(got_lse, want_lse)
    eager = fresh()
    cukiln.torch.decode_step(*eager, cos_sin_cache=s["cos_sin"])
    compiled = fresh()
    alone(*compiled)
    for n, a, b in zip(names, eager, compiled):
        assert torch.equal(a, b), f"{n} as the eager step left it"
