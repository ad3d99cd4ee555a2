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


def test_torch_calls_without_a_stream_go_straight_through(monkeypatch):
    seen = []

    def rope(x, *, freqs=None, out=None):
        seen.append((x, freqs))
        return x

    wrapped = interop.accepts_foreign_arrays(rope)
    x = torch.zeros(2)
    monkeypatch.setattr(interop, "as_torch", lambda *a: pytest.fail("no conversion on the torch path"))
    assert wrapped(x, freqs=x) is x and seen == [(x, x)]
    assert wrapped.__name__ == "rope" and wrapped.__wrapped__ is rope


def test_jax_arrays_refuse_in_place_and_out():
    def rope(x, *, inplace=False, out=None):
        pytest.fail("refused before the call")

    wrapped = interop.accepts_foreign_arrays(rope)
    x = _fake("jaxlib.xla_extension", __dlpack__=lambda: None)
    with pytest.raises(TypeError, match="JAX arrays are immutable"):
        wrapped(x, inplace=True)
    with pytest.raises(TypeError, match="JAX arrays are immutable"):
        wrapped(x, out=x)


def test_non_arrays_reach_the_validation_which_names_them():
    import cukiln

    with pytest.raises(TypeError, match="x"):
        cukiln.rope([1.0, 2.0], base=10000.0)
