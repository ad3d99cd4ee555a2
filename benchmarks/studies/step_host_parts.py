"""Where an eager cukiln.decode_step's (and decode_attention's) host time goes (GPU), on the bench's tiny step (GQA
32/8, d 128, bf16, 64 cached tokens, lengths on the device): the public call, the same call straight into its native
caller with its arguments built once (no Python above the C++), and the kernels launched bare from Python. The paths
take turns over ROUNDS rounds; medians and best rounds.

    python benchmarks/studies/step_host_parts.py OUT_DIR
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

import cukiln
import cukiln.torch  # noqa: F401  (registers the ops and the native path)
from cukiln import decode_torch, kv_append_torch, native
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import per_call_us
from cukiln.torch_support import NATIVE_HANDLES

CALLS, ROUNDS = 10_000, 7


def paths() -> dict:
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    q, k, v, kc, vc, lens, table, out = (s[n] for n in ("q", "k", "v", "k_cache", "v_cache", "lens", "cos_sin",
                                                         "out"))
    step_args = (q, k, v, kc, vc, lens, "bhsd", None, 0, None, None, None, None, table, None, None, 1.0, 1.0, False,
                 None, 0, None, None, 1e-6, None, None, None, False)
    step_out = native.variant(NATIVE_HANDLES["decode_step"], "#out#no_lse",
                              kv_append_torch._step_variant_miss(True, False), 1)
    dq = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    dk = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    dv, d_out = torch.randn_like(dk), torch.empty_like(dq)
    decode_args = (dq, dk, dv, None, 64, "bhsd", None, 0, None, None, None, False)
    decode_out = native.variant(NATIVE_HANDLES["decode_attention"], "#out#no_lse",
                                decode_torch._variant_miss(True, False), 1)
    y = torch.randn(1, 1, 1, 64, device="cuda")
    found = {
        "torch add_": lambda: y.add_(1.0),
        "cukiln.decode_step(out=) public": lambda: cukiln.decode_step(q, k, v, kc, vc, lens, cos_sin_cache=table,
                                                                      out=out),
        "decode_step native caller, arguments built once": lambda: step_out(*step_args, out),
        "decode_step kernels launched bare": decode_step_bench.bare_step_launches(s),
        "cukiln.decode_attention(out=) public": lambda: cukiln.decode_attention(dq, dk, dv, 64, out=d_out),
        "decode_attention native caller, arguments built once": lambda: decode_out(*decode_args, d_out),
    }
    for fn in found.values():
        for _ in range(100):
            fn()
    torch.cuda.synchronize()
    return found


def main(out_dir: str) -> None:
    found = paths()
    samples = {name: [] for name in found}
    for _ in range(ROUNDS):
        for name, fn in found.items():
            samples[name].append(per_call_us(fn, CALLS))
    result = {"device": torch.cuda.get_device_name(), "calls": CALLS, "rounds": ROUNDS,
              "paths": {n: {"us_per_call": statistics.median(s), "rounds_us": s} for n, s in samples.items()}}
    with open(f"{out_dir}/step-host-parts.json", "w") as f:
        json.dump(result, f, indent=1)
    for name, entry in result["paths"].items():
        print(f"{entry['us_per_call']:8.2f} {min(entry['rounds_us']):8.2f}  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
