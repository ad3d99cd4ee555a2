"""Where a compiled cukiln call's host time goes (GPU): each torch.compile'd function (default and
reduce-overhead) around a cukiln op beside the same function around torch's op of the same argument shape, the
cudagraph skips torch reports for each, and a cProfile of each compiled call (the Python frames in it, by own
time).

    python benchmarks/studies/compiled_host_profile.py OUT_DIR

Writes OUT_DIR/compiled-host-profile.json (µs per call, skips) and OUT_DIR/compiled-host-profile.txt (the
profiles), and prints a table.
"""

from __future__ import annotations

import cProfile
import io
import json
import logging
import pstats
import statistics
import sys
import time

import torch

import cukiln.torch as ct
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import per_call_us

CALLS, ROUNDS = 3000, 5


def cases() -> dict:
    y = torch.randn(1, 1, 1, 64, device="cuda")
    x = torch.randn(1, 1, 1, 64, device="cuda")
    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    qkv = torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16)
    rq, rk = qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)
    table = torch.rand(4096, 128, device="cuda")
    pos = torch.zeros(1, device="cuda", dtype=torch.int64)
    step = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    return {
        "torch add_ (in place)": (lambda t: t.add_(1.0), (y,)),
        "torch t + 1 (out of place)": (lambda t: t + 1.0, (y,)),
        "ct.rope in place": (lambda t: ct.rope(t, base=10000.0, inplace=True), (x,)),
        "ct.rope out of place": (lambda t: ct.rope(t, base=10000.0), (x,)),
        "ct.rope_qk in place (cos_sin_cache, positions)": (
            lambda a, b, c, p: ct.rope_qk(a, b, cos_sin_cache=c, positions=p, layout="thd", inplace=True),
            (rq, rk, table, pos)),
        "ct.decode_attention": (lambda t: ct.decode_attention(t, k, v, 64), (q,)),
        "ct.decode_step (device lengths, cos_sin_cache)": (
            lambda a, b, c, kc, vc, lens: ct.decode_step(a, b, c, kc, vc, lens, cos_sin_cache=step["cos_sin"]),
            tuple(step[n] for n in ("q", "k", "v", "k_cache", "v_cache", "lens"))),
    }


_CPP_PROBE = r"""
#include <torch/library.h>
#include <ATen/core/Tensor.h>
void touch_(at::Tensor& x) {}
at::Tensor fresh(const at::Tensor& x) { return at::empty_like(x); }
TORCH_LIBRARY(cukiln_cpp_probe, m) {
  m.def("touch_(Tensor(a!) x) -> ()");
  m.def("fresh(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(cukiln_cpp_probe, CompositeExplicitAutograd, m) {
  m.impl("touch_", touch_);
  m.impl("fresh", fresh);
}
"""


def floor_cases() -> dict:
    """Ops whose kernels do nothing (an in-place one and one that allocates its result): in Python, and in C++
    (built here with torch.utils.cpp_extension, timed with its build)."""
    library = torch.library.Library("cukiln_py_probe", "DEF")
    library.define("touch_(Tensor(a!) x) -> ()")
    library.define("fresh(Tensor x) -> Tensor")
    library.impl("touch_", lambda x: None, "CompositeExplicitAutograd")
    library.impl("fresh", lambda x: torch.empty_like(x), "CompositeExplicitAutograd")
    torch.library.register_fake("cukiln_py_probe::touch_", lambda x: None, lib=library)
    torch.library.register_fake("cukiln_py_probe::fresh", lambda x: torch.empty_like(x), lib=library)
    floor_cases.keep = library
    y = torch.randn(1, 1, 1, 64, device="cuda")
    found = {"python op, empty (in place)": (lambda t: torch.ops.cukiln_py_probe.touch_(t), (y,)),
             "python op, allocates": (lambda t: torch.ops.cukiln_py_probe.fresh(t), (y,))}
    from torch.utils.cpp_extension import load_inline

    start = time.perf_counter()
    load_inline("cukiln_cpp_probe", cpp_sources=_CPP_PROBE, is_python_module=False, verbose=False)
    print(f"C++ probe op built in {time.perf_counter() - start:.1f} s")
    found["C++ op, empty (in place)"] = (lambda t: torch.ops.cukiln_cpp_probe.touch_(t), (y,))
    found["C++ op, allocates"] = (lambda t: torch.ops.cukiln_cpp_probe.fresh(t), (y,))
    return found


def main(out_dir: str) -> None:
    skips = []

    class Catch(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if "cudagraph" in message:
                skips.append(message.splitlines()[0])

    for name in ("torch._inductor", "torch._inductor.cudagraph_trees", "torch._inductor.output_code",
                 "torch._inductor.perf_hints"):
        logging.getLogger(name).addHandler(Catch())
    torch._logging.set_logs(perf_hints=True)
    paths, reasons = {}, {}
    all_cases = cases()
    all_cases.update(floor_cases())
    eager = {}
    for name, (body, args) in all_cases.items():
        eager[f"{name} [eager]"] = (body, args)
    for name, (body, args) in all_cases.items():
        for mode in (None, "reduce-overhead"):
            label = f"{name} [{mode or 'default'}]"
            torch._dynamo.reset()
            before = len(skips)
            fn = torch.compile(body, fullgraph=True, mode=mode)
            for _ in range(50):
                fn(*args)
            torch.cuda.synchronize()
            reasons[label] = skips[before:]
            paths[label] = (fn, args)
    paths.update(eager)
    figures = {label: [] for label in paths}
    for _ in range(ROUNDS):
        for label, (fn, args) in paths.items():
            figures[label].append(per_call_us(lambda: fn(*args), CALLS))
    report = io.StringIO()
    for label, (fn, args) in paths.items():
        if label.endswith("[eager]"):
            continue
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            fn(*args)
        profile.disable()
        torch.cuda.synchronize()
        report.write(f"\n===== {label}\n")
        pstats.Stats(profile, stream=report).sort_stats("tottime").print_stats(18)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": CALLS, "rounds": ROUNDS,
              "paths": {label: {"us_per_call": statistics.median(f), "rounds_us": f, "cudagraph_skips": reasons.get(label, [])}
                        for label, f in figures.items()}}
    with open(f"{out_dir}/compiled-host-profile.json", "w") as f:
        json.dump(result, f, indent=1)
    with open(f"{out_dir}/compiled-host-profile.txt", "w") as f:
        f.write(report.getvalue())
    for label, entry in result["paths"].items():
        print(f"{entry['us_per_call']:8.2f}  {label}  {'; '.join(entry['cudagraph_skips'])[:150]}")


if __name__ == "__main__":
    main(sys.argv[1])
