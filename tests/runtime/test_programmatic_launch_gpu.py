"""Programmatic launch (sm_90 on): a cukiln kernel may be scheduled while the kernel before it in the
stream still runs, and must not touch memory before that kernel has finished.

The kernel before it here lets its dependents start at once (griddepcontrol.launch_dependents as its
first instruction), then waits about 100 us and only then copies words from one buffer to another. A
cukiln kernel that read its input without waiting would see the poison still in it; one that wrote its
output without waiting would change what the copy reads (each test here failed against a build
whose kernels skip the wait). On GPUs before sm_90 the same tests check plain stream order.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
cupy = pytest.importorskip("cupy")

import cukiln  # noqa: E402
from cukiln.tools.decode.checks import DECODE_FP32_UNITS  # noqa: E402
from tests.checks import assert_matches_reference  # noqa: E402

pytestmark = pytest.mark.gpu

_SLOW_COPY = r"""
extern "C" __global__ void slow_copy(unsigned int* dst, const unsigned int* src, long long words, long long cycles) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x) dst[i] = src[i];
}
"""
SPIN_CYCLES = 200_000  # ~100 us at H100 clocks: far longer than a launch
QUEUE_CYCLES = 4_000_000  # ~2 ms: time for the host to queue the copy and the cukiln call behind it
# A multiprocessor splits its memory between L1 and shared memory for the kernels it runs: the copy asks
# for the largest split (and a little shared memory it does not use), so that a kernel that needs much
# shared memory (decode attention) can start beside it.
COPY_SHARED_BYTES = 16 * 1024


@functools.lru_cache(maxsize=None)
def _slow_copy_kernel():
    """The copy kernel, compiled and run once, so that no compile happens between queued launches."""
    import numpy as np

    kernel = cupy.RawKernel(_SLOW_COPY, "slow_copy")
    kernel.max_dynamic_shared_size_bytes = COPY_SHARED_BYTES
    kernel.preferred_shared_memory_carveout = 100  # percent: the largest shared-memory split
    word = cupy.zeros(1, dtype=cupy.int32)
    kernel((1,), (32,), (word, word, np.int64(1), np.int64(0)), shared_mem=COPY_SHARED_BYTES)
    cupy.cuda.Device().synchronize()
    return kernel


def _slow_copy(dst: torch.Tensor, src: torch.Tensor, then) -> None:
    """dst = src (bit for bit) by a kernel on torch's current stream that lets dependents start at once,
    with ``then()`` (the cukiln call, warmed up before: no module load or allocation) queued behind it
    before it starts: a dependent queued only after the copy has let it start is not started early."""
    import numpy as np

    assert dst.is_contiguous() and src.is_contiguous() and dst.nbytes == src.nbytes and dst.nbytes % 4 == 0
    kernel = _slow_copy_kernel()
    words = dst.nbytes // 4
    as_words = [cupy.asarray(t.view(torch.int32)) for t in (dst, src)]
    sms = torch.cuda.get_device_properties(dst.device).multi_processor_count
    torch.cuda.synchronize()  # everything before is done: the copy is the kernel right before cukiln's
    torch.cuda._sleep(QUEUE_CYCLES)  # holds the stream while the copy and the cukiln call are queued
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        kernel((sms,), (256,), (*as_words, np.int64(words), np.int64(SPIN_CYCLES)), shared_mem=COPY_SHARED_BYTES)
    then()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_reads_its_input_only_after_the_kernel_writing_it(dtype):
    source = torch.randn(512, 2, 16, 128, device="cuda", dtype=dtype)
    x = torch.full_like(source, float("nan"))
    freqs = torch.rand(512, 128, device="cuda") * 50
    out = torch.empty_like(x)
    cukiln.rope(source, freqs=freqs, out=out)  # warm-up: the module is loaded, the plan cached
    _slow_copy(x, source, lambda: cukiln.rope(x, freqs=freqs, out=out))
    assert_matches_reference(out, cukiln.reference.rope(source, freqs=freqs), "rope after the kernel writing x")


def test_rope_writes_its_output_only_after_the_kernel_reading_it():
    x = torch.randn(512, 2, 16, 128, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(512, 128, device="cuda") * 50
    buffer = torch.randn_like(x)
    original = buffer.clone()
    seen = torch.empty_like(buffer)
    cukiln.rope(x, freqs=freqs, out=torch.empty_like(x))  # warm-up
    _slow_copy(seen, buffer, lambda: cukiln.rope(x, freqs=freqs, out=buffer))  # the copy reads buffer late
    assert torch.equal(seen, original), "rope wrote its output before the kernel reading that memory had finished"
    assert_matches_reference(buffer, cukiln.reference.rope(x, freqs=freqs), "rope into buffer")


def test_decode_reads_the_query_only_after_the_kernel_writing_it():
    # One pass: with split-KV the same check passed against the broken build too (not shown to catch it)
    num_splits = 1
    source = torch.randn(4, 32, 128, device="cuda", dtype=torch.bfloat16)
    q = torch.full_like(source, float("nan"))
    k, v = (torch.randn(4, 8, 1024, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.tensor([1024, 1, 700, 513], device="cuda", dtype=torch.int32)
    out = torch.empty_like(q)
    cukiln.decode_attention(source, k, v, lens, num_splits=num_splits, out=out)  # its workspace is now cached
    _slow_copy(q, source, lambda: cukiln.decode_attention(q, k, v, lens, num_splits=num_splits, out=out))
    assert_matches_reference(out, cukiln.reference.decode_attention(source, k, v, lens),
                             "decode after the kernel writing q", fp32_units=DECODE_FP32_UNITS)
