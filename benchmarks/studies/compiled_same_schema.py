"""What a compiled cukiln call costs beyond torch's own work for a call of its shape (GPU): each torch.compile'd
function (default and reduce-overhead) around a cukiln op, beside the same function around a C++ op of the same
schema whose kernel does nothing but allocate the op's results (a "same-schema probe", built here with
torch.utils.cpp_extension) and beside the same function around torch's ``add_`` and ``+``. The probe pays what
torch charges any op with these arguments inside a compiled graph (the guards on each input tensor, the graph's
size and stride asserts, the argument parsing of the op call, the dispatcher); the gap from probe to cukiln op is
cukiln's own host time (its gate, plan-cache hit and launch).

    python benchmarks/studies/compiled_same_schema.py OUT_DIR [--eager-only]

Also times each op called eagerly through the dispatcher (``torch.ops.cukiln.<op>.default(*arguments)``) beside
its probe called the same way: the probe's row is torch's own price for an op call with these arguments.
``--eager-only`` skips the compiled rows. Writes OUT_DIR/compiled-same-schema.json (or -eager.json; µs per call,
median of ROUNDS rounds, each path's CUDA-graph skips) and prints a table.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from types import SimpleNamespace

import torch

import cukiln
import cukiln.torch as ct
from cukiln import rope_api, rope_torch
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import per_call_us

CALLS, ROUNDS = 3000, 7
OPS = ("rope_", "rope", "rope_qk_", "decode_attention", "decode_step")

# Each probe's kernel: the op's arguments dropped, its results allocated as the op's fake kernel shapes them.
_PROBE = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/core/stack.h>

namespace {
size_t arguments(const c10::OperatorHandle& op) { return op.schema().arguments().size(); }
void none(const c10::OperatorHandle& op, torch::jit::Stack* stack) { torch::jit::drop(*stack, arguments(op)); }
void like_first(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto x = torch::jit::peek(*stack, 0, arguments(op)).toTensor();
  torch::jit::drop(*stack, arguments(op));
  torch::jit::push(*stack, at::empty_like(x));
}
void attention(const c10::OperatorHandle& op, torch::jit::Stack* stack) {  // (out like q, lse [b, h_q] fp32)
  auto q = torch::jit::peek(*stack, 0, arguments(op)).toTensor();
  torch::jit::drop(*stack, arguments(op));
  torch::jit::push(*stack, at::empty_like(q), at::empty({q.size(0), q.size(1)}, q.options().dtype(at::kFloat)));
}
}  // namespace

TORCH_LIBRARY_IMPL(cukiln_schema_probe, CompositeExplicitAutograd, m) {
  m.impl("rope_", torch::CppFunction::makeFromBoxedFunction<&none>());
  m.impl("rope", torch::CppFunction::makeFromBoxedFunction<&like_first>());
  m.impl("rope_qk_", torch::CppFunction::makeFromBoxedFunction<&none>());
  m.impl("decode_attention", torch::CppFunction::makeFromBoxedFunction<&attention>());
  m.impl("decode_step", torch::CppFunction::makeFromBoxedFunction<&attention>());
}
"""


def probe_ops():
    """torch.ops.cukiln_schema_probe: each of OPS under its cukiln schema (defined here, from the op's own), with a
    fake kernel as cukiln's and the C++ kernel above."""
    library = torch.library.Library("cukiln_schema_probe", "DEF")
    for name in OPS:
        schema = str(getattr(torch.ops.cukiln, name).default._schema)
        library.define(schema.replace("cukiln::", "", 1))
    fakes = {"rope_": lambda x, *a: None, "rope": lambda x, *a: torch.empty_like(x),
             "rope_qk_": lambda q, k, *a: None,
             "decode_attention": lambda q, *a: (torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)),
             "decode_step": lambda q, *a: (torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32))}
    for name, fake in fakes.items():
        torch.library.register_fake(f"cukiln_schema_probe::{name}", fake, lib=library)
    probe_ops.keep = library
    from torch.utils.cpp_extension import load_inline

    start = time.perf_counter()
    load_inline("cukiln_schema_probe", cpp_sources=_PROBE, is_python_module=False, verbose=False)
    print(f"same-schema probe ops built in {time.perf_counter() - start:.1f} s")
    return torch.ops.cukiln_schema_probe


def inputs() -> SimpleNamespace:
    """The tensors every row uses (`cukiln bench overhead`'s tiny calls), and each op's arguments after its data
    tensors as the rows' calls give them."""
    kw = rope_api.rope.__kwdefaults__
    rope_args = lambda **given: tuple(dict(kw, **given).get(n) for n in rope_torch.OP_ARGUMENTS)  # noqa: E731
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    n = SimpleNamespace(y=torch.randn(1, 1, 1, 64, device="cuda"), x=torch.randn(1, 1, 1, 64, device="cuda"),
                        freqs=torch.rand(1, 64, device="cuda"),
                        qkv=torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16),
                        table=torch.rand(4096, 128, device="cuda"),
                        positions=torch.zeros(1, device="cuda", dtype=torch.int64),
                        q=torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16),
                        k=torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16),
                        step_table=s["cos_sin"],
                        step=tuple(s[name] for name in ("q", "k", "v", "k_cache", "v_cache", "lens")))
    n.v = torch.randn_like(n.k)
    n.args = {"rope_": rope_args(base=10000.0), "rope": rope_args(freqs=n.freqs),
              "rope_qk_": rope_args(cos_sin_cache=n.table, positions=n.positions, layout="thd"),
              "decode_attention": (None, 64, "bhsd", None, 0, None, None, None, False),
              "decode_step": ("bhsd", None, 0, None, None, None, None, n.step_table, None, None, 1.0, 1.0, False,
                              None, 0, None, None, 1e-6, None, None, None, False)}
    return n


def qk(qkv):  # q and k sliced from one token's fused projection, as a serving step does
    return qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)


def op_calls(probe, n: SimpleNamespace) -> dict:
    """label -> (op, its arguments): each cukiln op and its probe, called eagerly through the dispatcher with the
    arguments the compiled rows' functions give them."""
    data = {"rope_": (n.x,), "rope": (n.x,), "rope_qk_": qk(n.qkv), "decode_attention": (n.q, n.k, n.v),
            "decode_step": n.step}
    found = {}
    for name, tensors in data.items():
        found[f"op cukiln::{name} [eager]"] = (getattr(torch.ops.cukiln, name).default, tensors + n.args[name])
        found[f"probe {name} [eager]"] = (getattr(probe, name).default, tensors + n.args[name])
    return found


def cases(probe, n: SimpleNamespace) -> dict:
    """label -> (function, its arguments): torch's references, then each cukiln call (as `cukiln bench overhead`
    makes it) and the same function around its probe, called with the op's own arguments."""

    def cukiln_qk(qkv):  # q and k sliced inside the function
        ct.rope_qk(*qk(qkv), cos_sin_cache=n.table, positions=n.positions, layout="thd", inplace=True)
        return qkv

    def probe_qk(qkv):
        probe.rope_qk_(*qk(qkv), *n.args["rope_qk_"])
        return qkv

    return {
        "torch add_ (in place)": (lambda t: t.add_(1.0), (n.y,)),
        "torch t + 1 (allocates)": (lambda t: t + 1.0, (n.y,)),
        "cukiln rope in place (base)": (lambda t: ct.rope(t, base=10000.0, inplace=True), (n.x,)),
        "probe rope_": (lambda t: probe.rope_(t, *n.args["rope_"]), (n.x,)),
        "cukiln rope, allocates (freqs)": (lambda t: ct.rope(t, freqs=n.freqs), (n.x,)),
        "probe rope": (lambda t: probe.rope(t, *n.args["rope"]), (n.x,)),
        "cukiln rope_qk in place (q, k sliced inside)": (cukiln_qk, (n.qkv,)),
        "probe rope_qk_ (q, k sliced inside)": (probe_qk, (n.qkv,)),
        "cukiln decode_attention": (lambda t: ct.decode_attention(t, n.k, n.v, 64), (n.q,)),
        "probe decode_attention": (lambda t: probe.decode_attention(t, n.k, n.v, *n.args["decode_attention"]),
                                   (n.q,)),
        "cukiln decode_step": (lambda *t: ct.decode_step(*t, cos_sin_cache=n.step_table), n.step),
        "probe decode_step": (lambda *t: probe.decode_step(*t, *n.args["decode_step"]), n.step),
    }


def main(out_dir: str, eager_only: bool = False) -> None:
    skips = []

    class Catch(logging.Handler):
        def emit(self, record):
            if "skipping cudagraphs" in record.getMessage():
                skips.append(record.getMessage().splitlines()[0])

    logging.getLogger("torch._inductor").addHandler(Catch())
    paths, reasons = {}, {}
    probe, n = probe_ops(), inputs()
    for label, (fn, args) in {"torch add_ [eager]": (lambda t: t.add_(1.0), (n.y,)), **op_calls(probe, n)}.items():
        for _ in range(50):
            fn(*args)
        paths[label], reasons[label] = (fn, args), []
    for name, (body, args) in ({} if eager_only else cases(probe, n)).items():
        for mode in (None, "reduce-overhead"):
            label = f"{name} [{mode or 'default'}]"
            before = len(skips)
            fn = torch.compile(body, fullgraph=True, mode=mode)
            for _ in range(50):
                fn(*args)
            torch.cuda.synchronize()
            reasons[label] = skips[before:]
            paths[label] = (fn, args)
    figures = {label: [] for label in paths}
    for _ in range(ROUNDS):  # the paths take turns, so that a noisy host spreads its noise over all of them
        for label, (fn, args) in paths.items():
            figures[label].append(per_call_us(lambda: fn(*args), CALLS))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cukiln": cukiln.__version__,
              "calls": CALLS, "rounds": ROUNDS,
              "paths": {label: {"us_per_call": statistics.median(f), "rounds_us": f,
                                "cudagraph_skips": reasons[label]} for label, f in figures.items()}}
    with open(f"{out_dir}/compiled-same-schema{'-eager' if eager_only else ''}.json", "w") as f:
        json.dump(result, f, indent=1)
    for label, entry in result["paths"].items():
        skipped = "skipped" if entry["cudagraph_skips"] else ""
        print(f"{entry['us_per_call']:8.2f} {min(entry['rounds_us']):8.2f}  {label}  {skipped}")


if __name__ == "__main__":
    main(sys.argv[1], "--eager-only" in sys.argv[2:])
