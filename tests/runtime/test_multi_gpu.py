"""Several GPUs in one process: a tensor on cuda:1 runs a module loaded on device 1 while device 0 is
current (and the other way round), modules are cached per device, and the caller's current device and
CUDA context are what they were after every call."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cukiln  # noqa: E402
from cukiln import native  # noqa: E402
from cukiln.loader import KERNELS  # noqa: E402
from cukiln.tools.decode.checks import DECODE_FP32_UNITS  # noqa: E402
from tests.checks import assert_matches_reference  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {torch.cuda.device_count()}")


def _current_context() -> int:
    from cuda.bindings import driver

    return int(driver.cuCtxGetCurrent()[1])


@pytest.mark.parametrize("current, target", [(0, 1), (1, 0)])
def test_tensors_on_another_device_run_there_and_leave_the_current_device_alone(current, target):
    with torch.cuda.device(current):
        torch.zeros(1, device="cuda")  # the current device's context is current
        context = _current_context()
        device = torch.device("cuda", target)
        x = torch.randn(300, 2, 4, 128, device=device, dtype=torch.bfloat16)
        freqs = torch.rand(300, 128, device=device) * 50
        out = cukiln.rope(x, freqs=freqs)
        q = torch.randn(2, 8, 128, device=device, dtype=torch.bfloat16)
        k = torch.randn(2, 2, 400, 128, device=device, dtype=torch.bfloat16)
        lens = torch.tensor([400, 33], device=device, dtype=torch.int32)
        attended = cukiln.decode_attention(q, k, k, lens, num_splits=3)  # two launches (split + combine)
        assert torch.cuda.current_device() == current and _current_context() == context
        # again: the calls hit their plans, and the C++ path guards the device itself
        variants = ("rope", "decode_attention#no_lse")
        served = [native.module().python_count(v) for v in variants] if native.module() is not None else None
        out = cukiln.rope(x, freqs=freqs)
        attended = cukiln.decode_attention(q, k, k, lens, num_splits=3)
        assert torch.cuda.current_device() == current and _current_context() == context
        if served is not None:
            assert [native.module().python_count(v) for v in variants] == served, "the second calls were hits"
        assert out.device == device and attended.device == device
        assert_matches_reference(out, cukiln.reference.rope(x, freqs=freqs), "rope on another device")
        assert_matches_reference(attended, cukiln.reference.decode_attention(q, k, k, lens),
                                 "decode on another device", fp32_units=DECODE_FP32_UNITS)
    assert target in {device for device, _ in KERNELS._modules}, "the module was loaded on the tensor's device"


def test_modules_are_cached_per_device():
    for device in (0, 1):
        x = torch.randn(64, 1, 2, 64, device=f"cuda:{device}")
        cukiln.rope(x, base=10000.0, inplace=True)
    names_by_device = {d: {name for dev, name in KERNELS._modules if dev == d} for d in (0, 1)}
    assert names_by_device[0] & names_by_device[1], "the same module is loaded once on each device"
