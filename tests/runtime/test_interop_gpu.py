"""CuPy and JAX arrays through cukiln.rope and cukiln.decode_attention, and the stream= argument."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu  # without a GPU, skipped by tests/conftest.py
# JAX takes most of the GPU's memory at its first allocation unless told not to (torch shares the GPU).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import cukiln  # noqa: E402


def _rope_inputs():
    gen = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(64, 2, 4, 32, device="cuda", generator=gen)
    freqs = torch.rand(64, 1, 1, 32, device="cuda", generator=gen) * 10
    return x, freqs


def test_cupy_arrays_in_cupy_arrays_out():
    cupy = pytest.importorskip("cupy")
    x, freqs = _rope_inputs()
    xc, fc = cupy.from_dlpack(x), cupy.from_dlpack(freqs)
    y = cukiln.rope(xc, freqs=fc)
    assert isinstance(y, cupy.ndarray) and y.shape == xc.shape
    torch.testing.assert_close(torch.from_dlpack(y), cukiln.rope(x, freqs=freqs), rtol=0, atol=0)
    cukiln.rope(xc, freqs=fc, inplace=True)  # writes the CuPy array's own memory
    cupy.cuda.get_current_stream().synchronize()
    torch.testing.assert_close(x, torch.from_dlpack(y), rtol=0, atol=0)


def test_cupy_current_stream_is_the_default_and_stream_is_honoured():
    """On a stream held up by a 50 ms sleep, x is overwritten, then rotated: launched on any other stream,
    the kernel would read x before the overwrite."""
    cupy = pytest.importorskip("cupy")
    x, freqs = _rope_inputs()
    new = torch.randn_like(x)
    expected = cukiln.rope(new, freqs=freqs)
    torch.cuda.synchronize()
    xc, fc, newc = (cupy.from_dlpack(t) for t in (x, freqs, new))
    for explicit in (False, True):
        xc[...] = 0
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            torch.cuda.set_stream(torch.cuda.ExternalStream(stream.ptr))
            torch.cuda._sleep(100_000_000)  # about 50 ms of GPU clock, on the CuPy stream
            torch.cuda.set_stream(torch.cuda.default_stream())
            xc[...] = newc  # queued on the CuPy stream behind the sleep
            y = cukiln.rope(xc, freqs=fc, stream=stream) if explicit else cukiln.rope(xc, freqs=fc)
        stream.synchronize()
        torch.testing.assert_close(torch.from_dlpack(y), expected, rtol=0, atol=0)


def test_jax_arrays_in_jax_arrays_out():
    jax = pytest.importorskip("jax")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX sees no GPU")
    import jax.dlpack
    import numpy as np

    x, freqs = _rope_inputs()
    xj = jax.device_put(np.asarray(x.cpu()), gpu)
    fj = jax.device_put(np.asarray(freqs.cpu()), gpu)
    y = cukiln.rope(xj, freqs=fj)
    assert isinstance(y, jax.Array)
    got = torch.from_dlpack(y)
    # JAX's start-up may leave another GPU current (x then lives there): compare the values, not the devices.
    assert got.device.type == "cuda"
    torch.testing.assert_close(got.cpu(), cukiln.rope(x, freqs=freqs).cpu(), rtol=0, atol=0)
    with pytest.raises(TypeError, match="immutable"):
        cukiln.rope(xj, freqs=fj, inplace=True)


def test_decode_attention_takes_cupy_caches_and_returns_cupy_results():
    cupy = pytest.importorskip("cupy")
    gen = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(2, 8, 64, device="cuda", generator=gen).half()
    k, v = (torch.randn(2, 2, 300, 64, device="cuda", generator=gen).half()[:, :, :257] for _ in range(2))
    lens = torch.tensor([257, 31], dtype=torch.int32, device="cuda")
    out, lse = cukiln.decode_attention(*(cupy.from_dlpack(t) for t in (q, k, v, lens)), return_lse=True)
    assert isinstance(out, cupy.ndarray) and isinstance(lse, cupy.ndarray)
    want, want_lse = cukiln.decode_attention(q, k, v, lens, return_lse=True)
    torch.testing.assert_close(torch.from_dlpack(out), want, rtol=0, atol=0)
    torch.testing.assert_close(torch.from_dlpack(lse), want_lse, rtol=0, atol=0)


class _CudaArrayInterfaceOnly:
    """An array that speaks only __cuda_array_interface__ (as Numba's device arrays do), over a tensor."""

    def __init__(self, tensor):
        self._tensor = tensor  # keeps the memory alive
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


def test_cuda_array_interface_arrays_are_written_in_place():
    x, freqs = _rope_inputs()
    expected = cukiln.rope(x, freqs=freqs)
    out = torch.full_like(x, float("nan"))
    cukiln.rope(_CudaArrayInterfaceOnly(x), freqs=_CudaArrayInterfaceOnly(freqs), out=_CudaArrayInterfaceOnly(out))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    cukiln.rope(_CudaArrayInterfaceOnly(x), freqs=freqs, inplace=True)
    torch.cuda.synchronize()
    torch.testing.assert_close(x, expected, rtol=0, atol=0)
