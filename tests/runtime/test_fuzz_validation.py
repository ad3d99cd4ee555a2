"""Property tests of argument validation (CPU): random shapes, strides, dtypes, devices, alignments and
arguments. Every call either plans a launch whose dispatch key names a compiled variant consistent with
the inputs, or raises ValueError / TypeError; any other exception is a bug.
"""

from __future__ import annotations

import os
import re

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cukiln.decode_plan import MAX_CLUSTER_SPLITS, plan_decode  # noqa: E402
from cukiln.generated import dispatch  # noqa: E402
from cukiln.rope_plan import plan_rope  # noqa: E402
from cukiln.tensors import TensorInfo  # noqa: E402

# CI explores the same examples every run (a new find should not fail an unrelated change); set
# CUKILN_FUZZ_RANDOM=1 to search new ones, and pin what they find with @example.
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=os.environ.get("CUKILN_FUZZ_RANDOM") != "1")
BASE = 1 << 24
DTYPES = ("fp32", "fp16", "bf16", "int32", "int64")


def strided(draw, shape, dtype, device=0) -> TensorInfo:
    """``shape`` laid out in memory in a random axis order (a permuted view), with padding between rows now
    and then, and rarely a strided last axis or a broadcast axis; at a random element offset."""
    n = len(shape)
    order = draw(st.permutations(range(n))) if draw(st.integers(0, 3)) == 0 else list(range(n))
    strides = [0] * n
    step = draw(st.sampled_from((1,) * 9 + (2,)))
    for axis in reversed(order):
        strides[axis] = step
        step *= max(shape[axis], 1) + draw(st.sampled_from((0, 0, 0, 0, 8, 1)))
    if n and draw(st.integers(0, 19)) == 0:
        strides[draw(st.integers(0, n - 1))] = 0
    ptr = BASE + draw(st.sampled_from((0, 0, 0, 0, 1, 2, 4, 8))) * 2
    return TensorInfo(ptr, tuple(shape), tuple(strides), dtype, device)


def rarely(draw, usual, *odd):
    """``usual`` most of the time, else one of ``odd``: mostly valid calls, each field sometimes wrong."""
    return usual if draw(st.integers(0, 9)) else draw(st.sampled_from(odd))


@st.composite
def rope_calls(draw):
    layout = rarely(draw, draw(st.sampled_from(("sbhd", "bshd", "thd"))), "x", "bhsd")
    d = draw(st.sampled_from((2, 8, 64, 80, 128)))
    if layout == "thd":
        shape = [draw(st.sampled_from((0, 1, 7, 40))), draw(st.sampled_from((1, 3, 8))), d]
    else:
        shape = [draw(st.sampled_from((0, 1, 5, 33))), draw(st.sampled_from((1, 2, 4))),
                 draw(st.sampled_from((1, 3, 8))), d]
    if draw(st.integers(0, 19)) == 0:
        shape = shape[:-1]  # a wrong rank
    dtype = rarely(draw, draw(st.sampled_from(("fp32", "fp16", "bf16"))), "int32", "int64")
    x = strided(draw, shape, dtype, device=rarely(draw, 0, 1))
    rd = rarely(draw, draw(st.sampled_from((d, max(2, d // 2)))), d + 2, 3, 0)
    max_pos = rarely(draw, 64, 1, 0)
    source = draw(st.sampled_from(("freqs", "cossin", "invfreq", "base")))
    table_dtype = rarely(draw, "fp32", "fp16", "int32")
    if source == "freqs":
        angles = {"freqs": strided(draw, (max_pos, 1, 1, rd), table_dtype)}
    elif source == "cossin":
        cos = strided(draw, (max_pos, rd), rarely(draw, dtype if dtype in ("fp16", "bf16", "fp32") else "fp32",
                                                  "fp32", "int32"))
        angles = {"cos": cos, "sin": _moved(cos, 1 << 30), "rotary_dim": rd}
    elif source == "invfreq":
        angles = {"inv_freq": strided(draw, (max(1, rd // 2),), table_dtype)}
    else:
        angles = {"base": rarely(draw, 10000.0, -1.0, "big"), "rotary_dim": rarely(draw, None, rd)}
    if draw(st.integers(0, 19)) == 0:
        angles["base"] = 500.0  # two angle sources
    kwargs = dict(angles, layout=layout, interleaved=draw(st.booleans()), backward=draw(st.booleans()),
                  inplace=draw(st.booleans()), rope_scale=rarely(draw, 1.0, float("nan"), "1"),
                  offsets=rarely(draw, draw(st.sampled_from((None, 0, 3))), -1, 10**6),
                  cp_size=rarely(draw, 1, 2, 0), cp_rank=rarely(draw, 0, 1, -1, 2))
    if draw(st.integers(0, 4)) == 0 and len(shape) >= 3:  # M-RoPE: three rows of positions, sections of the pairs
        seq, batch = (shape[0], 1) if layout == "thd" else (shape[1], shape[0]) if layout == "bshd" else shape[:2]
        rows = rarely(draw, draw(st.sampled_from(((3, seq), (3, batch, seq)))), (2, seq), (seq,))
        kwargs["positions"] = strided(draw, rows, rarely(draw, "int64", "int32", "fp32"))
        kwargs["offsets"] = rarely(draw, None, 3)
        pairs = max(rd, 0) // 2
        kwargs["mrope_section"] = rarely(draw, (pairs // 3, pairs // 3, pairs - 2 * (pairs // 3)), (pairs, 1, 0),
                                         (1, 2), "x")
        kwargs["mrope_interleaved"] = rarely(draw, draw(st.booleans()), 1)
    if layout == "thd" and shape and len(shape) == 3 and "positions" not in kwargs:
        tokens = shape[0]
        cuts = sorted(draw(st.lists(st.integers(0, tokens), min_size=0, max_size=3)))
        cu = [0] + cuts + [tokens]
        if draw(st.integers(0, 9)) == 0:
            cu = draw(st.lists(st.integers(-2, tokens + 2), min_size=1, max_size=5))  # malformed
        kwargs["cu_seqlens"] = TensorInfo(BASE << 12, (len(cu),), (1,), rarely(draw, "int32", "int64"), x.device)
        kwargs["cu_seqlens_host"] = tuple(cu)
    return x, kwargs


def _moved(t: TensorInfo | None, by: int) -> TensorInfo | None:
    """The same metadata at a distant address (a separate allocation)."""
    return None if t is None else TensorInfo(t.ptr + by, t.shape, t.strides, t.dtype, t.device)


REJECTED = object()


# A rejection names the argument it is about; anything else (a TypeError from a None subscripted, say) is a crash
# in the planning itself.
ROPE_ERROR_NAMES = re.compile(r"^(x|out|freqs|cos|sin|cos/sin|cos_sin_cache|inv_freq|base|angles|rope_scale|mscale|layout"
                              r"|rotary_dim|rotary_offset|offsets|positions|mrope_section|mrope_interleaved"
                              r"|cu_seqlens|cp_size|cp_rank|max_seqlen)\b")


def planned_rope(x: TensorInfo, kwargs: dict) -> tuple[TensorInfo, object]:
    """(out, the plan or None) of a drawn rope call that validation accepts, (out, REJECTED) for one it
    refuses with a ValueError or TypeError naming an argument; any other exception fails the test."""
    out = x if kwargs["inplace"] else _moved(x, 1 << 32)
    try:
        return out, plan_rope(x, out, **kwargs)
    except (ValueError, TypeError) as e:
        assert ROPE_ERROR_NAMES.match(str(e)), f"not a validation error: {type(e).__name__}: {e}"
        return out, REJECTED


DECODE_ERROR_NAMES = re.compile(r"^(q|k_cache|v_cache|kv_lens|kv_start|kv_layout|scale|softcap|num_splits|out"
                                r"|pipeline)\b")


def planned_decode(q, k, v, kv_lens, kwargs: dict):
    """The plan of a drawn decode call (on a 132-multiprocessor sm_90), or REJECTED as planned_rope."""
    try:
        return plan_decode(q, k, v, kv_lens, sms=132, arch="sm_90", **kwargs)
    except (ValueError, TypeError) as e:
        # a rejection names the argument it is about (anything else is a crash in the planning itself)
        assert DECODE_ERROR_NAMES.match(str(e)), f"not a validation error: {type(e).__name__}: {e}"
        return REJECTED


@given(call=rope_calls())
@example(call=(TensorInfo(BASE, (1, 1, 2), (2, 2, 1), "fp32", 1),  # packed tokens, no sequence: nothing to do
               {"base": 500.0, "rotary_dim": 2, "layout": "thd", "interleaved": False, "backward": False,
                "inplace": False, "rope_scale": 1.0, "offsets": None, "cp_size": 1, "cp_rank": 0,
                "cu_seqlens": TensorInfo(BASE << 12, (1,), (1,), "int32", 1), "cu_seqlens_host": (0,)}))
@SETTINGS
def test_rope_validation_plans_a_consistent_variant_or_raises_a_clear_error(call):
    x, kwargs = call
    out, plan = planned_rope(x, kwargs)
    if plan is REJECTED:
        return
    if plan is None:  # nothing to do: an empty tensor, or packed tokens with no sequence to belong to
        no_sequence = "cu_seqlens" in kwargs and kwargs["cu_seqlens"].shape == (1,)
        assert x.numel == 0 or no_sequence
        return
    module, symbol, _ = dispatch.ROPE[plan.key]
    assert (plan.module, plan.symbol) == (module, symbol)
    dtype, kind, pairing, _, strides, vec, _, _, mrope = plan.key
    assert mrope == ("mrope_section" in kwargs)
    names = dispatch.ROPE_PARAMS[dispatch.ROPE[plan.key][2]][0]
    assert plan.values[names.index("backward")] == int(kwargs["backward"]) and dtype == x.dtype
    assert kind == ("thd" if "cu_seqlens" in kwargs else "dense")  # thd with positions is planned as dense
    assert (pairing == "interleaved") == kwargs["interleaved"]
    assert vec == 1 or (x.ptr % (vec * x.itemsize) == 0 and out.ptr % (vec * x.itemsize) == 0)
    assert strides != 4 or vec == 1


@st.composite
def decode_calls(draw):
    d = rarely(draw, draw(st.sampled_from((64, 80, 96, 128, 192, 256))), 48, 512)
    b = draw(st.sampled_from((0, 1, 3)))
    h_kv = draw(st.sampled_from((1, 2, 4)))
    h_q = h_kv * draw(st.sampled_from((1, 2, 4, 20))) + rarely(draw, 0, 1)
    T = draw(st.sampled_from((0, 1, 17, 300)))
    dtype = rarely(draw, draw(st.sampled_from(("fp16", "bf16"))), "fp32", "int32")
    layout = rarely(draw, draw(st.sampled_from(("bhsd", "bshd"))), "x")
    dims = (b, h_kv, T, d) if layout != "bshd" else (b, T, h_kv, d)
    k = strided(draw, dims, rarely(draw, dtype, "fp16", "bf16"), device=rarely(draw, 0, 1))
    v = k if draw(st.booleans()) else _moved(k, 1 << 30)
    q_shape = rarely(draw, (b, h_q, d), (b, 1, h_q, d), (b, h_q, 1, d), (b, 2, h_q, d), (b, h_q, d + 8))
    q = strided(draw, q_shape, dtype)
    kv_lens = rarely(draw, draw(st.integers(0, max(T, 0))), -1, T + 1, None, 2.5, "tensor", "int64 tensor")
    if isinstance(kv_lens, str):
        kv_lens = TensorInfo(BASE << 14, (b,), (1,), "int32" if kv_lens == "tensor" else "int64", q.device)
    kwargs = dict(kv_layout=layout, kv_start=rarely(draw, None, 0, 1, -1, 10**6),
                  softcap=rarely(draw, None, 30.0, 0.0, -1.0), num_splits=rarely(draw, None, 1, 3, 0, 10**7),
                  scale=rarely(draw, None, 0.1, float("inf")))
    if draw(st.integers(0, 4)) == 0:
        kwargs["out"] = rarely(draw, _moved(q, 1 << 33), q, strided(draw, q_shape, "fp32"))
    return q, k, v, kv_lens, kwargs


@given(call=decode_calls())
@SETTINGS
def test_decode_validation_plans_a_consistent_variant_or_raises_a_clear_error(call):
    q, k, v, kv_lens, kwargs = call
    plan = planned_decode(q, k, v, kv_lens, kwargs)
    if plan is REJECTED:
        return
    module, symbol, _, combine_module, combine = dispatch.DECODE[plan.key]
    assert plan.attention.symbol == symbol and plan.attention.module == module
    dtype, head_dim, strides, vec, pipeline, cache, form = plan.key
    assert dtype == q.dtype and head_dim == q.shape[-1] and cache == ("e4m3" if k.dtype == "e4m3" else "same")
    assert form == "fixed"
    # sm_90: split-KV runs as clusters of all of a (row, KV head)'s splits when there are few enough,
    # else through the combine kernel
    clustered = 1 < plan.num_splits <= MAX_CLUSTER_SPLITS
    assert plan.attention.cluster == (plan.num_splits if clustered else 1)
    assert (plan.combine is None) == (plan.num_splits == 1 or clustered)
    assert plan.combine is None or (plan.combine.module, plan.combine.symbol) == (combine_module, combine)
    assert strides != 4 or vec == 1
    assert pipeline == "narrow" or (strides, vec * k.itemsize, head_dim <= 128) == (3, 16, True)
    assert k.ptr % (vec * k.itemsize) == 0 and v.ptr % (vec * v.itemsize) == 0
    assert plan.attention.block[0] == dispatch.DECODE_THREADS[pipeline] and plan.attention.grid[2] == plan.batch
