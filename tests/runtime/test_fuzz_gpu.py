"""The validation fuzzer's calls, run on the GPU: every call that passes validation is materialized as real
tensors of the drawn shapes, strides, dtypes and alignments and checked against the float64 reference.
(Calls that validation rejects are the CPU fuzzer's business: tests/runtime/test_fuzz_validation.py.)"""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")
from hypothesis import example, given, settings  # noqa: E402

from cukiln.tensors import TensorInfo  # noqa: E402

from ..checks import assert_matches_reference  # noqa: E402
from .test_decode_gpu import DECODE_FP32_UNITS  # noqa: E402
from .test_fuzz_validation import (REJECTED, SETTINGS, decode_calls, planned_decode, planned_rope,  # noqa: E402
                                   rope_calls)

GPU_SETTINGS = settings(SETTINGS, max_examples=150)


class Materializer:
    """Real CUDA tensors for TensorInfo metadata: same shape, strides, dtype and pointer alignment (mod 16
    bytes); metadata at the same address gives the same tensor (an in-place call, K and V in one buffer)."""

    def __init__(self):
        self.made: dict[tuple, object] = {}

    def __call__(self, info: TensorInfo | None, fill: str = "randn", high: int = 1):
        import torch

        if info is None:
            return None
        key = (info.ptr, info.shape, info.strides, info.dtype)
        if key in self.made:
            return self.made[key]
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int32": torch.int32,
                 "int64": torch.int64}[info.dtype]
        offset = (info.ptr % 16) // info.itemsize
        extent = 1 + sum((n - 1) * s for n, s in zip(info.shape, info.strides)) if info.numel else 0
        storage = torch.empty(offset + extent + 1, dtype=dtype, device="cuda")
        if fill == "randn":
            storage.normal_()
        elif fill == "rand":
            storage.uniform_(0, 10)
        else:
            storage.random_(0, high + 1)
        t = storage.as_strided(info.shape, info.strides, offset)
        self.made[key] = t
        return t


def _on_this_gpu(*infos) -> bool:
    return all(i is None or not isinstance(i, TensorInfo) or i.device == 0 for i in infos)


@pytest.mark.gpu
@given(call=rope_calls())
@GPU_SETTINGS
def test_rope_calls_that_pass_validation_match_the_reference(call):
    import torch

    import cukiln

    x, kwargs = call
    out_info, plan = planned_rope(x, kwargs)
    if plan is REJECTED or plan is None or not _on_this_gpu(x, *kwargs.values()):
        return
    print("rope", plan.symbol, plan.grid, plan.block, x, kwargs, flush=True)  # seen with -s: a hang's last call
    make = Materializer()
    args = dict(kwargs)
    host = args.pop("cu_seqlens_host", None)
    if host is not None:
        args["cu_seqlens"] = torch.tensor(host, dtype=torch.int32)  # host values: checked, then copied over
    for name in ("freqs", "cos", "sin", "inv_freq"):
        if isinstance(args.get(name), TensorInfo):
            args[name] = make(args[name], "rand")
    if isinstance(kwargs.get("positions"), TensorInfo):  # inside the tables (M-RoPE's three rows among them)
        rows = [kwargs[name].shape[0] for name in ("freqs", "cos") if isinstance(kwargs.get(name), TensorInfo)]
        args["positions"] = make(kwargs["positions"], "randint", max(min(rows, default=1000) - 1, 0))
    xt = make(x)
    ref = cukiln.reference.rope(xt, **args)  # before an in-place call overwrites x
    if kwargs["inplace"]:
        got = cukiln.rope(xt, **args)
    else:
        out = make(out_info)
        out.copy_(xt)  # thd rows past the last sequence are left alone, as the reference leaves them
        got = cukiln.rope(xt, out=out, **args)
    assert_matches_reference(got, ref, f"rope {plan.symbol}")


@pytest.mark.gpu
@given(call=decode_calls())
# found by this test: a q of the [b, 1, h_q, d] form (here an empty batch) gives a q-shaped output, which
# the reference then returned as [b, h_q, d]
@example(call=(TensorInfo(1 << 24, (0, 1, 2, 64), (0, 128, 64, 1), "fp16", 0),
               TensorInfo(1 << 24, (0, 1, 0, 64), (64, 64, 64, 1), "fp16", 0),
               TensorInfo(1 << 30, (0, 1, 0, 64), (64, 64, 64, 1), "fp16", 0), 0,
               {"kv_layout": "bhsd", "kv_start": 0, "softcap": None, "num_splits": None, "scale": None}))
@example(call=(TensorInfo(1 << 24, (3, 4, 1, 64), (256, 64, 64, 1), "bf16", 0),
               TensorInfo(1 << 26, (3, 2, 17, 64), (2176, 1088, 64, 1), "bf16", 0),
               TensorInfo(1 << 28, (3, 2, 17, 64), (2176, 1088, 64, 1), "bf16", 0), 17,
               {"kv_layout": "bhsd", "kv_start": None, "softcap": None, "num_splits": None, "scale": None}))
@GPU_SETTINGS
def test_decode_calls_that_pass_validation_match_the_reference(call):
    import cukiln

    q, k, v, kv_lens, kwargs = call
    plan = planned_decode(q, k, v, kv_lens, kwargs)
    if plan is REJECTED or plan is None or not _on_this_gpu(q, k, v, kv_lens, kwargs.get("out")):
        return
    print("decode", plan.attention.symbol, q, k, v, kv_lens, kwargs, flush=True)  # seen with -s
    make = Materializer()
    T = k.shape[2] if kwargs["kv_layout"] == "bhsd" else k.shape[1]
    qt, kt = make(q), make(k)
    vt = kt if v is k else make(v)
    lens = make(kv_lens, "randint", high=T) if isinstance(kv_lens, TensorInfo) else kv_lens
    args = dict(kwargs)
    if args.get("out") is not None:
        args["out"] = make(args["out"])
    ref = cukiln.reference.decode_attention(qt, kt, vt, lens, **{k_: a for k_, a in args.items() if k_ != "out"})
    got = cukiln.decode_attention(qt, kt, vt, lens, **args)
    assert_matches_reference(got, ref, f"decode {plan.attention.symbol}", fp32_units=DECODE_FP32_UNITS)
