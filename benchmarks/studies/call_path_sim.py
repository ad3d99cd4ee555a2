"""The public calls' Python on any machine: CPU tensors taken as device 0's, the kernel launch replaced by a stub
that packs the parameter struct (as the bound kernel does) and launches nothing, so a change of a few tenths of a
microsecond in the call path shows through (a GPU host's own noise is 1.5x between runs). The stubs are
tests/runtime/test_call_path.py's stub_device. Times: best of 5 rounds of 20000 calls, µs a call.

Run from the repository root: PYTHONPATH=. python benchmarks/studies/call_path_sim.py
"""

from __future__ import annotations

import struct
import timeit

import torch

import cukiln
from cukiln import rope_api
from tests.runtime.test_call_path import stub_device


def install_stubs() -> None:
    def kernel(device, module, symbol, fmt, grid, block, *rest):
        packer, buffer = struct.Struct(fmt), bytearray(4096)
        return lambda values, stream: packer.pack_into(buffer, 0, *values)

    stub_device(setattr, kernel)


def calls() -> dict:
    x = torch.randn(1, 1, 1, 64)
    freqs, out = torch.rand(1, 64), torch.empty(1, 1, 1, 64)
    qkv = torch.randn(1, 48 * 128, dtype=torch.bfloat16)
    q, k = qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)
    serving = dict(cos_sin_cache=torch.rand(4096, 128), positions=torch.zeros(1, dtype=torch.int64), layout="thd")
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    dq = torch.randn(1, 32, 128, dtype=torch.bfloat16)
    kc, vc = torch.randn(1, 8, 64, 128, dtype=torch.bfloat16), torch.randn(1, 8, 64, 128, dtype=torch.bfloat16)
    d_out = torch.empty_like(dq)
    y = torch.randn(1)
    return {
        "torch (CPU): y.add_(1.0)": lambda: y.add_(1.0),
        "cukiln.rope (in place, base)": lambda: cukiln.rope(x, base=10000.0, inplace=True),
        "cukiln.rope (out=, freqs)": lambda: cukiln.rope(x, freqs=freqs, out=out),
        "cukiln.rope_qk (in place, cos_sin_cache, positions)": lambda: cukiln.rope_qk(q, k, inplace=True, **serving),
        "cukiln.rope_qk (out=, cos_sin_cache, positions)": lambda: cukiln.rope_qk(q, k, out=(q_out, k_out), **serving),
        "rope_qk's plan-cache hit (prepare, in place)": lambda: rope_api.prepare(q, k, inplace=True, **serving),
        "rope's plan-cache hit (prepare, in place, base)": lambda: rope_api.prepare(x, None, base=10000.0,
                                                                                    inplace=True),
        "cukiln.decode_attention (b=1, T=64, out=)": lambda: cukiln.decode_attention(dq, kc, vc, 64, out=d_out),
        "cukiln.kv_append (b=1, lens 5, cos_sin_cache)": lambda: cukiln.kv_append(
            q, k, qkv[:, 5120:].view(1, 8, 128), kc, vc, 5, cos_sin_cache=serving["cos_sin_cache"]),
        "cukiln.decode_step (b=1, lens 5, cos_sin_cache, out=)": lambda: cukiln.decode_step(
            q, k, qkv[:, 5120:].view(1, 8, 128), kc, vc, 5, cos_sin_cache=serving["cos_sin_cache"], out=d_out),
    }


def main() -> None:
    install_stubs()
    for name, fn in calls().items():
        fn()
        us = min(timeit.repeat(fn, number=20000, repeat=5)) / 20000 * 1e6
        print(f"{name:52s} {us:6.2f} us")


if __name__ == "__main__":
    main()
