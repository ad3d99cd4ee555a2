"""Foreign arrays and streams (cukiln.interop) on the CPU: framework detection, stream handles, the
torch fast path, and the refusals; the GPU test runs CuPy and JAX arrays for real."""

from __future__ import annotations

import pytest
import torch

from cukiln import interop


def _fake(module: str, **attributes):
    """An instance of a class that claims to come from ``module``: callables become methods returning their
    result, other values plain attributes."""
    cls = type("Array", (), {name: (lambda self, v=v: v()) if callable(v) else v for name, v in attributes.items()})
    cls.__module__ = module
    return cls()


def test_frameworks_are_told_apart_by_module_and_protocol():
    cai = {"shape": (2, 3), "typestr": "<f2", "data": (1 << 20, False), "version": 3}
    assert interop.framework(torch.zeros(1)) == "torch"
    assert interop.framework(_fake("cupy._core.core", __cuda_array_interface__=cai, __dlpack__=lambda: None)) == "cupy"
    assert interop.framework(_fake("jaxlib.xla_extension", __dlpack__=lambda: None)) == "jax"
    assert interop.framework(_fake("numba.cuda", __cuda_array_interface__=cai)) == "cai"
    assert interop.framework(_fake("somelib", __dlpack__=lambda: None)) == "dlpack"
    for plain in (None, 3, 1.5, "x", [1, 2]):
        assert interop.framework(plain) is None


def test_stream_handles_from_ints_streams_and_the_stream_protocol():
    assert interop.stream_handle(0) == 0 and interop.stream_handle(0x1234) == 0x1234
    assert interop.stream_handle(_fake("torch.cuda.streams", cuda_stream=77)) == 77
    assert interop.stream_handle(_fake("cupy.cuda.stream", ptr=88)) == 88
    assert interop.stream_handle(_fake("cuda.core", __cuda_stream__=lambda: (0, 99))) == 99
    for bad in (True, "stream", 1.0, object()):
        with pytest.raises(TypeError, match="stream: expected"):
            interop.stream_handle(bad)


def test_torch_tensors_are_told_apart_and_remembered():
    x = torch.zeros(2)
    assert interop.TORCH_TYPES.is_torch(x)
    assert type(x) in interop.TORCH_TYPES.known  # remembered: the entry points' inline test is one set lookup
    assert not interop.TORCH_TYPES.is_torch(_fake("cupy._core.core", __cuda_array_interface__={}))
    assert not interop.TORCH_TYPES.is_torch([1.0])


def test_a_stream_on_a_torch_call_converts_nothing_and_runs_the_call_on_that_stream(monkeypatch):
    import contextlib

    entered, seen = [], []

    @contextlib.contextmanager
    def entering(what):
        entered.append(what)
        yield

    monkeypatch.setattr(torch.cuda, "ExternalStream", lambda handle, device: ("external", handle))
    monkeypatch.setattr(torch.cuda, "stream", lambda s: entering(s))
    monkeypatch.setattr(torch.cuda, "device", lambda d: entering(("device", str(d))))

    def rope(x, *, freqs=None, out=None, stream=None):
        seen.append((x, freqs, stream, list(entered)))
        return x

    x = torch.zeros(2)
    assert interop.call_with_foreign_arrays(rope, {"x": x, "freqs": x, "out": None, "stream": 1234}) is x
    # called once with the same tensors, without the stream argument, inside x's device and with the
    # stream 1234 made torch's current one
    assert len(seen) == 1 and seen[0][0] is x and seen[0][1] is x
    assert seen[0][2:] == (None, [("device", "cpu"), ("external", 1234)])


def test_jax_arrays_refuse_in_place_and_out():
    def rope(x, *, inplace=False, out=None, stream=None):
        pytest.fail("refused before the call")

    x = _fake("jaxlib.xla_extension", __dlpack__=lambda: None)
    with pytest.raises(TypeError, match="JAX arrays are immutable"):
        interop.call_with_foreign_arrays(rope, {"x": x, "inplace": True, "out": None, "stream": None})
    with pytest.raises(TypeError, match="JAX arrays are immutable"):
        interop.call_with_foreign_arrays(rope, {"x": x, "inplace": False, "out": x, "stream": None})


def test_non_arrays_reach_the_validation_which_names_them():
    import cukiln

    with pytest.raises(TypeError, match="x"):
        cukiln.rope([1.0, 2.0], base=10000.0)
