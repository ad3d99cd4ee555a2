"""The float64 references refuse what the kernels refuse (one rule, two executors: runtime/calls.py's validate runs
the ops' own planners on the reference's tensors): each bad call below, given to the public function (CPU tensors
taken as device 0's, nothing launched: tests/runtime/test_call_path.stub_device) and to the reference, raises the
same exception type naming the same argument, and writes no tensor; and random calls of rope and decode_attention,
mostly valid with each field sometimes wrong (as tests/runtime/test_fuzz_validation.py draws them for the planners),
meet the same outcome in both."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import reference  # noqa: E402

from .test_call_path import _Recorder, recorded, stub_device  # noqa: E402,F401  (recorded: a fixture)

BF16 = torch.bfloat16


def _append(change=None, **given):
    """A kv_append call's arguments (``change``: a function of them giving some anew, or ``given``): q [2, 4, 64] and
    k/v [2, 2, 64], caches of 32 slots."""
    q = torch.randn(2, 4, 64, dtype=BF16)
    k, v = torch.randn(2, 2, 64, dtype=BF16), torch.randn(2, 2, 64, dtype=BF16)
    caches = [torch.randn(2, 2, 32, 64, dtype=BF16) for _ in range(2)]
    args = dict(q=q, k_new=k, v_new=v, k_cache=caches[0], v_cache=caches[1], kv_lens=torch.tensor([3, 5],
                dtype=torch.int32), base=10000.0)
    args.update(change(args) if change is not None else given)
    return args


def _lens_out_is_lens(a):
    return {"kv_lens_out": a["kv_lens"]}


def _out_over_k_cache(a):
    return {"out": a["k_cache"][:, 0, :4]}  # [2, 4, 64] over the first head's first slots


APPEND_CASES = {
    "a layout that is none": (dict(kv_layout="nope"), ValueError, "kv_layout"),
    "fp32 tensors": (lambda a: {n: a[n].float() for n in ("q", "k_new", "v_new")}, TypeError, "q"),
    "an int32 v": (lambda a: {"v_new": a["v_new"].int()}, TypeError, "v_new"),
    "host lengths past the capacity": (dict(kv_lens=torch.tensor([3, 40], dtype=torch.int32)), ValueError, "kv_lens"),
    "kv_lens_out that is kv_lens": (_lens_out_is_lens, ValueError, "kv_lens_out"),
    "an out over the key cache": (_out_over_k_cache, ValueError, "out"),
    "a mis-shaped q_norm_weight": (dict(q_norm_weight=torch.ones(32, dtype=BF16)), ValueError, "q_norm_weight"),
    "k's head dim 32 beside q's 64": (lambda a: {n: torch.randn(2, 2, 32, dtype=BF16) for n in ("k_new", "v_new")},
                                      ValueError, "k_new"),
    "two angle sources": (dict(freqs=torch.rand(64, 64)), ValueError, "angles"),
    "a rope_scale with a table": (dict(base=None, freqs=torch.rand(64, 64), rope_scale=2.0), ValueError,
                                  "rope_scale"),
}


def _snapshot(args: dict) -> dict:
    return {n: t.clone() for n, t in args.items() if isinstance(t, torch.Tensor)}


def _written(args: dict, before: dict) -> list[str]:
    """The tensors of ``args`` whose bits differ from ``before``'s (an uninitialized out may hold NaNs)."""
    def bits(t):
        return t.contiguous().view(torch.uint8) if t.dtype.itemsize and t.numel() else t
    return [n for n, t in before.items() if not torch.equal(bits(args[n]), bits(t))]


def _same_refusal(call_kernel, call_reference, args: dict, error, name: str) -> None:
    before = _snapshot(args)
    for call in (call_kernel, call_reference):
        with pytest.raises(error) as raised:
            call(**args)
        assert str(raised.value).split(":")[0].split(",")[0] == name, str(raised.value)
        assert not _written(args, before), f"{_written(args, before)} written by a refused call"


@pytest.mark.parametrize("case", sorted(APPEND_CASES))
def test_kv_append_and_its_reference_refuse_alike(recorded, case):
    change, error, name = APPEND_CASES[case]
    _same_refusal(cukiln.kv_append, reference.kv_append, _append(**change) if isinstance(change, dict)
                  else _append(change), error, name)


def _decode(**change):
    q = torch.randn(2, 8, 64, dtype=BF16)
    k, v = (torch.randn(2, 2, 32, 64, dtype=BF16) for _ in range(2))
    args = dict(q=q, k_cache=k, v_cache=v, kv_lens=torch.tensor([3, 9], dtype=torch.int32))
    args.update(change)
    return args


DECODE_CASES = {
    "lengths past the capacity": (dict(kv_lens=torch.tensor([3, 33], dtype=torch.int32)), ValueError, "kv_lens"),
    "a start past the length": (dict(kv_start=torch.tensor([4, 0], dtype=torch.int32)), ValueError, "kv_start"),
    "a layout that is none": (dict(kv_layout="nope"), ValueError, "kv_layout"),
    "a negative softcap": (dict(softcap=-1.0), ValueError, "softcap"),
    "splits and batch invariance": (dict(num_splits=2, batch_invariant=True), ValueError, "num_splits"),
    "no lengths": (dict(kv_lens=None), TypeError, "kv_lens"),
}


@pytest.mark.parametrize("case", sorted(DECODE_CASES))
def test_decode_attention_and_its_reference_refuse_alike(recorded, case):
    change, error, name = DECODE_CASES[case]
    _same_refusal(cukiln.decode_attention, reference.decode_attention, _decode(**change), error, name)


def test_the_decode_steps_reference_validates_both_ops_before_it_writes(recorded):
    args = _append(kv_lens=torch.tensor([3, 31], dtype=torch.int32))
    args.update(q=torch.randn(2, 8, 64, dtype=BF16))
    _same_refusal(cukiln.decode_step, reference.decode_step, dict(args, softcap=-1.0), ValueError, "softcap")
    _same_refusal(cukiln.decode_step, reference.decode_step, dict(args, kv_lens=torch.tensor([3, 32],
                                                                                     dtype=torch.int32)),
                  ValueError, "kv_lens")
    # an int length, as documented: the reference runs it
    out = reference.decode_step(**dict(args, kv_lens=7))
    assert out.shape == args["q"].shape and torch.isfinite(out).all()


def test_float64_slices_of_one_buffer_are_the_slices_they_stand_for():
    qkv = torch.randn(2, 256, dtype=torch.float64)
    q, k = qkv[:, :128].view(2, 2, 64), qkv[:, 128:].view(2, 2, 64)
    got_q, got_k = reference.rope_qk(q, k, base=1e4, positions=torch.arange(2), layout="thd", inplace=True)
    assert got_q is q and got_k is k
    with pytest.raises(ValueError, match="overlaps"):  # the same slices over each other's bytes
        reference.rope_qk(qkv[:, :128].view(2, 2, 64), qkv[:, 64:192].view(2, 2, 64), base=1e4,
                          positions=torch.arange(2), layout="thd", inplace=True)


def test_a_cpu_error_names_the_cpu():
    x = torch.randn(4, 1, 2, 64, dtype=torch.float64)
    with pytest.raises(ValueError) as raised:
        reference.rope(x, base=1e4, out=torch.empty(4, 1, 2, 32, dtype=torch.float64))
    assert "cuda:-1" not in str(raised.value) and "shape" in str(raised.value)
    with pytest.raises(ValueError) as raised:
        reference.rope(x, base=1e4, out=torch.empty(4, 1, 2, 64, dtype=torch.float16))
    assert "device" not in str(raised.value), "a dtype error names the dtype alone"


ROPE_CASES = {
    "a layout that is none": (dict(layout="nope"), ValueError, "layout"),
    "an odd rotary_dim": (dict(rotary_dim=63), ValueError, "rotary_dim"),
    "a rotary_dim past the head": (dict(rotary_dim=66), ValueError, "rotary_dim"),
    "int32 x": (dict(x=torch.zeros(4, 1, 2, 64, dtype=torch.int32)), TypeError, "x"),
    "two angle sources": (dict(freqs=torch.rand(8, 1, 1, 64)), ValueError, "angles"),
    "no angle source": (dict(base=None), ValueError, "angles"),
    "thd without cu_seqlens or positions": (dict(x=torch.randn(4, 2, 64, dtype=BF16), layout="thd"), ValueError,
                                            "cu_seqlens"),
    "an out of another shape": (dict(out=torch.empty(4, 1, 2, 32, dtype=BF16)), ValueError, "out"),
    "a cp_rank past cp_size": (dict(cp_size=2, cp_rank=2), ValueError, "cp_rank"),
}


@pytest.mark.parametrize("case", sorted(ROPE_CASES))
def test_rope_and_its_reference_refuse_alike(recorded, case):
    change, error, name = ROPE_CASES[case]
    args = dict(x=torch.randn(4, 1, 2, 64, dtype=BF16), base=10000.0)
    args.update(change)
    _same_refusal(cukiln.rope, reference.rope, args, error, name)


ROPE_QK_CASES = {
    "k of another dtype": (dict(k=torch.randn(4, 1, 1, 64, dtype=torch.float16)), TypeError, "k"),
    "k of another sequence length": (dict(k=torch.randn(3, 1, 1, 64, dtype=BF16)), ValueError, "k"),
    "an odd rotary_dim": (dict(rotary_dim=31), ValueError, "rotary_dim"),
}


@pytest.mark.parametrize("case", sorted(ROPE_QK_CASES))
def test_rope_qk_and_its_reference_refuse_alike(recorded, case):
    change, error, name = ROPE_QK_CASES[case]
    args = dict(q=torch.randn(4, 1, 2, 64, dtype=BF16), k=torch.randn(4, 1, 1, 64, dtype=BF16), base=10000.0)
    args.update(change)
    _same_refusal(cukiln.rope_qk, reference.rope_qk, args, error, name)


# --- the fuzzed calls: both executors on the same random call, mostly valid, each field sometimes wrong ----------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": BF16, "int32": torch.int32}


def _rarely(draw, usual, *odd):
    return usual if draw(st.integers(0, 7)) else draw(st.sampled_from(odd))


def _laid_out(draw, shape, dtype):
    """A tensor of ``shape`` and ``dtype`` in a random axis order (a permuted view), sometimes with a padded row."""
    order = draw(st.permutations(range(len(shape)))) if draw(st.integers(0, 3)) == 0 else list(range(len(shape)))
    stored = [shape[a] for a in order]
    if stored and draw(st.integers(0, 4)) == 0:
        stored[-1] += 8  # padding after each innermost row, cut off below
    base = (torch.randn(stored) * 4).to(dtype)
    if stored and stored[-1] != shape[order[-1]]:
        base = base[..., :shape[order[-1]]]
    return base.permute([order.index(a) for a in range(len(shape))])


@st.composite
def rope_calls(draw):
    layout = _rarely(draw, draw(st.sampled_from(("sbhd", "bshd", "thd"))), "bhsd")
    d = draw(st.sampled_from((8, 64, 80)))
    shape = ([draw(st.sampled_from((1, 5))), draw(st.sampled_from((1, 3))), d] if layout == "thd" else
             [draw(st.sampled_from((1, 5))), draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 3))), d])
    dtype = DTYPES[_rarely(draw, draw(st.sampled_from(("fp32", "fp16", "bf16"))), "int32")]
    x = _laid_out(draw, shape, dtype)
    rd = _rarely(draw, draw(st.sampled_from((d, d // 2))), d + 2, 3)
    source = draw(st.sampled_from(("freqs", "cos_sin_cache", "base")))
    table = torch.float32 if draw(st.integers(0, 7)) else torch.float16
    if source == "freqs":
        args = {"freqs": torch.rand(_rarely(draw, 16, 1), 1, 1, rd).to(table)}
    elif source == "cos_sin_cache":
        args = {"cos_sin_cache": torch.rand(16, rd).to(table), "rotary_dim": rd}
    else:
        args = {"base": _rarely(draw, 10000.0, -1.0), "rotary_dim": rd}
    if layout == "thd":
        tokens = shape[0]
        args["positions"] = _rarely(draw, torch.randint(0, 16, (tokens,)), torch.randint(0, 16, (tokens + 1,)),
                                    torch.rand(tokens))
    args.update(layout=layout, x=x, interleaved=draw(st.booleans()), inplace=draw(st.booleans()),
                offsets=_rarely(draw, draw(st.sampled_from((None, 0, 3))), -1))
    if not args["inplace"] and draw(st.integers(0, 5)) == 0:
        args["out"] = torch.empty(_rarely(draw, tuple(shape), (*shape[:-1], d + 2)), dtype=_rarely(draw, dtype, BF16))
    return args


def _outcome(call, args: dict):
    """("ok", None), or (the exception's type, the argument it names); and whether a refused call wrote a tensor."""
    before = _snapshot(args)
    try:
        call(**args)
    except (ValueError, TypeError) as error:
        assert not _written(args, before), f"{_written(args, before)} written by a refused call"
        return type(error), str(error).split(":")[0].split(",")[0]
    return "ok", None


@given(args=rope_calls())
@FUZZ
def test_fuzzed_rope_calls_meet_the_same_rule_in_both_executors(args):
    """Every drawn call: accepted by both, or refused by both with the same exception naming the same argument."""
    with pytest.MonkeyPatch.context() as patch:
        stub_device(patch.setattr, _Recorder())
        kernel = _outcome(cukiln.rope, {n: t.clone() if isinstance(t, torch.Tensor) else t for n, t in args.items()})
    assert kernel == _outcome(reference.rope, args)


@st.composite
def decode_calls(draw):
    """A decode_attention call. (No int64 lengths: a reference takes them, by design, as the int32 they stand for.)"""
    b, hkv, slots = draw(st.sampled_from((1, 3))), draw(st.sampled_from((1, 2))), draw(st.sampled_from((8, 40)))
    hq = hkv * draw(st.sampled_from((1, 4))) + _rarely(draw, 0, 1)
    d = _rarely(draw, draw(st.sampled_from((64, 128))), 48)
    dtype = DTYPES[_rarely(draw, draw(st.sampled_from(("fp16", "bf16"))), "fp32")]
    layout = _rarely(draw, draw(st.sampled_from(("bhsd", "bshd"))), "sbhd")
    cache_shape = (b, slots, hkv, d) if layout == "bshd" else (b, hkv, slots, d)
    k_cache, v_cache = (_laid_out(draw, cache_shape, _rarely(draw, dtype, torch.float32)) for _ in range(2))
    lens = torch.tensor([draw(st.integers(1, slots + _rarely(draw, 0, 2))) for _ in range(b)], dtype=torch.int32)
    args = dict(q=_laid_out(draw, (b, hq, d), dtype), k_cache=k_cache, v_cache=v_cache,
                kv_lens=_rarely(draw, lens, lens.float(), int(lens.max())), kv_layout=layout,
                softcap=_rarely(draw, None, 30.0, -1.0), num_splits=_rarely(draw, None, 2, 0),
                batch_invariant=_rarely(draw, False, True))
    if draw(st.integers(0, 3)) == 0:
        args["kv_start"] = torch.tensor([draw(st.integers(0, 3)) for _ in range(b)], dtype=torch.int32)
    return args


@given(args=decode_calls())
@FUZZ
def test_fuzzed_decode_calls_meet_the_same_rule_in_both_executors(args):
    """Every drawn call: accepted by both, or refused by both with the same exception naming the same argument."""
    with pytest.MonkeyPatch.context() as patch:
        stub_device(patch.setattr, _Recorder())
        kernel = _outcome(cukiln.decode_attention,
                          {n: t.clone() if isinstance(t, torch.Tensor) else t for n, t in args.items()})
    assert kernel == _outcome(reference.decode_attention, args)
