"""The float64 references refuse what the kernels refuse (one rule, two executors: runtime/calls.py's validate runs
the ops' own planners on the reference's tensors): each bad call below, given to the public function (CPU tensors
taken as device 0's, nothing launched: tests/runtime/test_call_path.stub_device) and to the reference, raises the
same exception type naming the same argument, and writes no tensor."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import reference  # noqa: E402

from .test_call_path import recorded  # noqa: E402,F401  (a fixture)

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


def _same_refusal(call_kernel, call_reference, args: dict, error, name: str) -> None:
    before = _snapshot(args)
    for call in (call_kernel, call_reference):
        with pytest.raises(error) as raised:
            call(**args)
        assert str(raised.value).split(":")[0].split(",")[0] == name, str(raised.value)
        for n, t in before.items():
            assert torch.equal(args[n], t), f"{n} was written by a refused call"


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
