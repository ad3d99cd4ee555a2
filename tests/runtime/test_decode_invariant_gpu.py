"""Batch-invariant decode on the GPU: a row's output and log-sum-exp are the same bits alone, in batches of 8 and
of 128 with random other rows, in caches of other capacities (one pass, a cluster merge or the combine kernel's
ordered merge), and replayed from a CUDA graph whose lengths change on the device; and they match the float64
reference, written into NaN-poisoned outputs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import overrides  # noqa: E402
from cukiln.decode_api import plan_call  # noqa: E402
from cukiln.decode_plan import INVARIANT_PIPELINES, INVARIANT_SPLITS, MAX_CLUSTER_SPLITS, invariant_splits  # noqa: E402
from cukiln.tools.decode.checks import DECODE_FP32_UNITS, check_lse, run_decode_and_compare  # noqa: E402
from cukiln.tools.verify import new_generator  # noqa: E402
from tests.checks import assert_matches_reference, planned_afresh  # noqa: E402

pytestmark = pytest.mark.gpu

H_KV, GROUP, D = 2, 4, 128
# Row lengths at and around the rule's thresholds: one, two and the most splits.
LENGTHS = (300, INVARIANT_SPLITS[0][0], 3000, INVARIANT_SPLITS[1][0], 20000)


def _batch(b, capacity, row, index, gen, dtype):
    """q, K and V caches (bhsd slices of buffers with 64 more positions) and int32 lengths of ``b`` rows, random,
    with ``row`` = (q [h_q, d], k [h_kv, n, d], v) placed at ``index`` (its length n), the others random lengths."""
    q = torch.randn(b, H_KV * GROUP, D, generator=gen, device="cuda").to(dtype)
    k, v = (torch.randn(b, H_KV, capacity + 64, D, generator=gen, device="cuda").to(dtype)[:, :, :capacity]
            for _ in range(2))
    lens = torch.randint(0, capacity + 1, (b,), generator=gen, device="cuda", dtype=torch.int32)
    rq, rk, rv = row
    n = rk.shape[1]
    q[index], k[index, :, :n], v[index, :, :n], lens[index] = rq, rk, rv, n
    return q, k, v, lens


def _decode(q, k, v, lens):
    out = torch.full_like(q, float("nan"))
    lse = cukiln.decode_attention(q, k, v, lens, out=out, return_lse=True, batch_invariant=True)[1]
    return out, lse


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("pipeline", ["auto", "deep"])  # the planner's (ws from sm_90 on), and deep
def test_a_rows_bits_depend_on_its_own_inputs_alone(n, dtype, pipeline, monkeypatch):
    monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
    gen = new_generator()
    row = (torch.randn(H_KV * GROUP, D, generator=gen, device="cuda").to(dtype),
           torch.randn(H_KV, n, D, generator=gen, device="cuda").to(dtype),
           torch.randn(H_KV, n, D, generator=gen, device="cuda").to(dtype))
    alone = _batch(1, n, row, 0, gen, dtype)
    problem, out, lse = run_decode_and_compare(*alone, batch_invariant=True)
    assert problem is None, f"row of {n} keys alone: {problem}"
    merges = set()
    for b, capacity, index in ((1, n + 700, 0), (1, 40000, 0), (8, max(n, 5000), 3), (128, max(n, 9000), 77),
                               (128, 40000, 127)):
        q, k, v, lens = _batch(b, capacity, row, index, gen, dtype)
        plan = plan_call(q, k, v, lens, batch_invariant=True)
        assert plan.num_splits == invariant_splits(capacity)
        if pipeline == "auto":  # the planner's first choice: ws from sm_90 on
            assert plan.pipeline == ("ws" if torch.cuda.get_device_capability()[0] >= 9 else "deep")
        merges.add("one pass" if plan.num_splits == 1 else "cluster" if plan.attention.cluster > 1 else "combine")
        got, got_lse = _decode(q, k, v, lens)
        where = f"row of {n} keys as row {index} of {b}, capacity {capacity} ({plan.num_splits} splits)"
        assert torch.equal(got[index], out[0]), f"{where}: output bits differ from the row alone"
        assert torch.equal(got_lse[index], lse[0]), f"{where}: log-sum-exp bits differ from the row alone"
        assert not got.isnan().any(), f"{where}: an output element left unwritten"
    # the row met each way of merging its splits that its length allows: the combine kernel (more splits than a
    # cluster holds), and from sm_90 on a cluster (capacities of two splits)
    expected = {"combine"}
    if torch.cuda.get_device_capability()[0] >= 9 and invariant_splits(n) <= 2 <= MAX_CLUSTER_SPLITS:
        expected.add("cluster")
    assert merges >= expected, f"row of {n} keys: merged by {sorted(merges)}"


@pytest.mark.parametrize("capacity", [INVARIANT_SPLITS[1][0], INVARIANT_SPLITS[1][0] + 808])
def test_the_pipelines_of_alike_tiles_give_the_same_bits(capacity, monkeypatch):
    """The planner's invariant pipelines (ws from sm_90 on, deep, narrow where a cache has neither) walk 64-key
    tiles alike, so which one runs changes no bit: two splits (merged in a cluster from sm_90 on) and the rule's
    most (by the combine kernel)."""
    gen = new_generator()
    row = tuple(torch.randn(*shape, generator=gen, device="cuda").to(torch.bfloat16)
                for shape in ((H_KV * GROUP, D), (H_KV, 3000, D), (H_KV, 3000, D)))
    q, k, v, lens = _batch(8, capacity, row, 0, gen, torch.bfloat16)
    results = {}
    runnable = [p for p in INVARIANT_PIPELINES if p != "ws" or torch.cuda.get_device_capability()[0] >= 9]
    for pipeline in runnable:
        monkeypatch.setitem(overrides.CURRENT, "decode_pipeline", pipeline)
        plan = plan_call(q, k, v, lens, batch_invariant=True)
        assert plan.pipeline == pipeline and plan.num_splits == invariant_splits(capacity)
        with planned_afresh("decode_attention#out"):  # this pipeline's own plan, not the one before's
            results[pipeline] = _decode(q, k, v, lens)
    first, (out, lse) = next(iter(results.items()))
    for pipeline, (other_out, other_lse) in results.items():
        assert torch.equal(out, other_out) and torch.equal(lse, other_lse), f"{first} and {pipeline} bits differ"


def test_graph_replay_with_lengths_changed_on_the_device():
    gen = new_generator()
    b, capacity, n, index = 8, 20000, 5000, 5
    row = tuple(torch.randn(*shape, generator=gen, device="cuda").to(torch.bfloat16)
                for shape in ((H_KV * GROUP, D), (H_KV, n, D), (H_KV, n, D)))
    alone_out, alone_lse = _decode(*_batch(1, n, row, 0, gen, torch.bfloat16))
    q, k, v, lens = _batch(b, capacity, row, index, gen, torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cukiln.decode_attention(q, k, v, lens, batch_invariant=True)  # warm-up: plans and loads outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = cukiln.decode_attention(q, k, v, lens, return_lse=True, batch_invariant=True)
    for _ in range(3):
        lens.copy_(torch.randint(0, capacity + 1, (b,), generator=gen, device="cuda", dtype=torch.int32))
        lens[index] = n
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out[index], alone_out[0]) and torch.equal(lse[index], alone_lse[0])
        ref, ref_lse = cukiln.reference.decode_attention(q, k, v, lens, return_lse=True)
        assert_matches_reference(out, ref, "replayed batch-invariant decode", fp32_units=DECODE_FP32_UNITS)
        assert check_lse(lse, ref_lse) is None, check_lse(lse, ref_lse)
