"""Whether torch.compile, once used in a process, changes what eager calls cost the host there (GPU): the public
decode step, its native caller with its arguments built once, its kernels launched bare, cukiln.rope in place and
torch's add_, timed alone, then after a reduce-overhead compiled function of the step has run, then after
torch._inductor's cudagraph trees are reset. `cukiln bench overhead` times every path after compiling its
compiled ones, so each of its eager rows carries what this finds. Prints medians / best of 5 rounds of 5000 calls.

    cd benchmarks && PYTHONPATH=. python studies/compiled_process_host_time.py
"""

from __future__ import annotations

import statistics

import torch

import cukiln
import cukiln.torch as ct
from cukiln import kv_append_torch, native
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import compiled, per_call_us
from cukiln.torch_support import NATIVE_HANDLES


def main() -> None:
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    q, k, v, kc, vc, lens, table, out = (s[n] for n in ("q", "k", "v", "k_cache", "v_cache", "lens", "cos_sin",
                                                         "out"))
    y = torch.randn(1, 1, 1, 64, device="cuda")
    step_args = (q, k, v, kc, vc, lens, "bhsd", None, 0, None, None, None, None, table, None, None, 1.0, 1.0, False,
                 None, 0, None, None, 1e-6, None, None, None, False)
    step_out = native.variant(NATIVE_HANDLES["decode_step"], "#out#no_lse",
                              kv_append_torch._step_variant_miss(True, False), 1)
    paths = {"add_": lambda: y.add_(1.0),
             "public": lambda: cukiln.decode_step(q, k, v, kc, vc, lens, cos_sin_cache=table, out=out),
             "native caller": lambda: step_out(*step_args, out),
             "bare kernels": decode_step_bench.bare_step_launches(s),
             "rope in place": lambda: cukiln.rope(y, base=1e4, inplace=True)}

    def timed(name: str) -> None:
        for f in paths.values():
            for _ in range(200):
                f()
        rounds = {n: [] for n in paths}
        for _ in range(5):
            for n, f in paths.items():
                rounds[n].append(per_call_us(f, 5000))
        print(name, "  ".join(f"{n} {statistics.median(x):.2f}/{min(x):.2f}" for n, x in rounds.items()), flush=True)

    timed("alone")

    def op_step(q, k, v, k_cache, v_cache, lens):
        return ct.decode_step(q, k, v, k_cache, v_cache, lens, cos_sin_cache=table)

    step = compiled(op_step, q, k, v, kc.clone(), vc.clone(), lens.clone(), mode="reduce-overhead", static=True)
    for _ in range(200):
        step()
    timed("after reduce-overhead static")
    torch._inductor.cudagraph_trees.reset_cudagraph_trees()
    timed("after reset_cudagraph_trees")


if __name__ == "__main__":
    main()
