"""The fused decode step under compute-sanitizer (GPU): one step each with one pass, four splits merged in a cluster
(with QK-norm) and sixteen merged by the combine kernel, the ws pipeline forced so that a split count given keeps the
fused kernel. Prints the kernel each step ran and whether its output is finite; the sanitizer reports the rest.

    compute-sanitizer --tool memcheck python benchmarks/studies/sanitize_fused_step.py
    CUKILN_DECODE_STEP_LAUNCH=separate \
        compute-sanitizer --tool memcheck python benchmarks/studies/sanitize_fused_step.py
"""

from __future__ import annotations

import torch

import cukiln
from cukiln import decode_step_api
from cukiln.overrides import forced


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    for num_splits, qk_norm in ((1, False), (4, True), (16, False)):
        b, hq, hkv, d, T = 2, 32, 8, 128, 2048
        q = torch.randn(b, hq, d, generator=g, device="cuda").bfloat16()
        k, v = (torch.randn(b, hkv, d, generator=g, device="cuda").bfloat16() for _ in range(2))
        kc, vc = (torch.randn(b, hkv, T, d, generator=g, device="cuda").bfloat16() for _ in range(2))
        lens = torch.tensor([2000, 77], dtype=torch.int32, device="cuda")
        kw = dict(base=1e4, num_splits=num_splits)
        if qk_norm:
            kw.update(q_norm_weight=torch.rand(d, device="cuda").bfloat16(),
                      k_norm_weight=torch.rand(d, device="cuda").bfloat16())
        with forced("decode_pipeline", "ws"):
            step = decode_step_api.plan_call(q, k, v, kc, vc, lens, **kw)
            out = cukiln.decode_step(q, k, v, kc, vc, lens, **kw)
        torch.cuda.synchronize()
        print("ok", step.fused.symbol if step.fused else None, num_splits, bool(torch.isfinite(out).all()))


if __name__ == "__main__":
    main()
