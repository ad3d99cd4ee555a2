"""Hardware counters of cukiln's kernels beside the ones they are measured against, for Nsight Compute.

Each case runs a few warm-up calls, then exactly one profiled call of each contender between
cudaProfilerStart/Stop, so that

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
        --section LaunchStats python benchmarks/ncu_compare.py [decode|rope ...]

reports only those kernels. Decode: bf16, h_q 32, h_kv 8, d 128 (the bench's shape), cukiln against torch
SDPA, for the cases DECODE_CASES or those given as `decode=8x512,1x8192`; RoPE: bf16 freqs forward on
[s, b, h, d] = [4096, 2, 32, 128], cukiln against a copy of the same tensor; rope-partial: the bench's
in-place rotary_dim = d/4 call on [4096, 1, 128, 128] beside the full-width out-of-place one (for the
DRAM bytes each moves: `--metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum`);
rope-views: [4096, 2, 32, 128] forward as sbhd and as a transposed (b, h, s, d) view, each beside a copy;
rope-thd: the thd bench's packed case (65536 tokens in 32 sequences, h 32, d 128, bf16 freqs forward) in each
dispatch mode, beside a copy; decode-fp8: the FP8 bench's e4m3 caches (per-tensor scales), cukiln beside its own
decode of the same values in bf16, for the cases given as `decode-fp8=32x8192,128x8192` (default 32x8192).
Without ncu the script just runs the calls (a smoke test).
"""

from __future__ import annotations

import sys

import torch

import cukiln
from cukiln.tools.decode.bench import inputs, torch_sdpa

DECODE_CASES = ((128, 8192), (1, 8192), (8, 512))
WARMUP = 3


def _profiled(label: str, fn) -> None:
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    with torch.cuda.nvtx.range(label):
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled: {label}", flush=True)


def decode(cases=DECODE_CASES) -> None:
    for b, T in cases:
        q, k, v = inputs(b, T)
        _profiled(f"cukiln decode b={b} T={T}", lambda: cukiln.decode_attention(q, k, v, T))
        _profiled(f"torch sdpa b={b} T={T}", lambda: torch_sdpa(q, k, v))


def decode_fp8(cases=((32, 8192),)) -> None:
    from cukiln.tools.decode.bench import FP8_SCALE, fp8_inputs

    for b, T in cases:
        q, k8, v8, k16, v16 = fp8_inputs(b, T)
        _profiled(f"cukiln decode fp8 b={b} T={T}",
                  lambda: cukiln.decode_attention(q, k8, v8, T, k_scale=FP8_SCALE, v_scale=FP8_SCALE))
        _profiled(f"cukiln decode bf16 b={b} T={T}", lambda: cukiln.decode_attention(q, k16, v16, T))


def rope() -> None:
    s, b, h, d = 4096, 2, 32, 128
    x = torch.randn(s, b, h, d, device="cuda", dtype=torch.bfloat16)
    freqs = torch.randn(s, 1, 1, d, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    _profiled("cukiln rope [4096,2,32,128]", lambda: cukiln.rope(x, freqs=freqs, out=out))
    _profiled("copy of the same tensor", lambda: out.copy_(x))


def rope_views() -> None:
    """[4096, 2, 32, 128] forward as sbhd and as a (b, h, s, d) tensor viewed as bshd (the bench's slowest
    view), each beside a copy of the same tensor."""
    s, b, h, d = 4096, 2, 32, 128
    freqs = torch.rand(s, 1, 1, d, device="cuda") * 100
    for label, x, layout in (
            ("sbhd", torch.randn(s, b, h, d, device="cuda", dtype=torch.bfloat16), "sbhd"),
            ("bhsd->bshd", torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2), "bshd")):
        out = torch.empty_like(x)
        _profiled(f"cukiln rope {label}", lambda: cukiln.rope(x, freqs=freqs, layout=layout, out=out))
        _profiled(f"copy {label}", lambda: out.copy_(x))


def rope_thd() -> None:
    from cukiln.tools.rope.thd import BENCH_TOKENS, HEAD_DIM, HEADS, dispatch_mode, split_lengths

    lengths = split_lengths(BENCH_TOKENS, 32)
    cu = torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    freqs = torch.rand(max(lengths), 1, 1, HEAD_DIM, device="cuda") * 100
    x = torch.randn(BENCH_TOKENS, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    for mode in ("grid", "token"):
        with dispatch_mode(mode):
            _profiled(f"cukiln rope thd {mode}", lambda: cukiln.rope(x, freqs=freqs, layout="thd", cu_seqlens=cu,
                                                                     max_seqlen=max(lengths), out=out))
    _profiled("copy of the same tensor", lambda: out.copy_(x))


def rope_partial() -> None:
    s, b, h, d = 4096, 1, 128, 128
    x = torch.randn(s, b, h, d, device="cuda", dtype=torch.bfloat16)
    full, quarter = (torch.rand(s, 1, 1, width, device="cuda") * 100 for width in (d, d // 4))
    out = torch.empty_like(x)
    _profiled("cukiln rope full width, out of place", lambda: cukiln.rope(x, freqs=full, out=out))
    _profiled("cukiln rope rotary_dim = d/4, in place", lambda: cukiln.rope(x, freqs=quarter, inplace=True))


if __name__ == "__main__":
    for arg in sys.argv[1:] or ("decode", "rope"):
        name, _, cases = arg.partition("=")
        if cases:
            {"decode": decode, "decode-fp8": decode_fp8}[name](
                [tuple(int(n) for n in case.split("x")) for case in cases.split(",")])
        else:
            {"decode": decode, "rope": rope, "rope-partial": rope_partial, "rope-thd": rope_thd,
             "rope-views": rope_views, "decode-fp8": decode_fp8}[name]()
