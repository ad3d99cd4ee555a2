"""What torch charges a decode step's op by its schema (any machine, CPU tensors): ops whose C++ kernel only
allocates the step's two results, under decode_step's schema (28 arguments), the same without its mutation
annotations, a 13-argument form (the tensors, one string of constants) and a 7-argument one (the step's tensors
alone, as the first form of runtime/specialize.py's ops took them; the form kept adds the numbers), each called
eagerly through the dispatcher and from a torch.compile'd function of the step's six inputs; beside torch's
``add_`` eager and compiled, on one tensor and on kv_lens in a function given the six inputs (an ``add_`` on a cache
would time the CPU's arithmetic).
Median and best of 7 rounds of 3000 calls, µs a call.

    PYTHONPATH=. python benchmarks/studies/step_schema_cost.py
"""

from __future__ import annotations

import statistics
import time

import torch
from torch.utils.cpp_extension import load_inline

_ANGLES = ("Tensor? positions, Tensor? freqs, Tensor? cos, Tensor? sin, Tensor? cos_sin_cache, Tensor? inv_freq, "
           "float? base, float rope_scale, float mscale, bool interleaved, int? rotary_dim, int rotary_offset, "
           "Tensor? q_norm_weight, Tensor? k_norm_weight, float norm_eps")
_TAIL = f"str kv_layout, Tensor? kv_start_tensor, int kv_start, {_ANGLES}, float? scale, float? softcap, " \
        "int? num_splits, bool advance_lens"
SCHEMAS = {
    "step28": f"Tensor q, Tensor k_new, Tensor v_new, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor(c!) kv_lens, "
              f"{_TAIL}",
    "step28_unannotated": f"Tensor q, Tensor k_new, Tensor v_new, Tensor k_cache, Tensor v_cache, Tensor kv_lens, "
                          f"{_TAIL}",
    "step13": "Tensor q, Tensor k_new, Tensor v_new, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor(c!) kv_lens, "
              "Tensor? kv_start, Tensor? positions, Tensor? angles, Tensor? angles_b, Tensor? q_norm_weight, "
              "Tensor? k_norm_weight, str constants",
    "step7": "Tensor q, Tensor k_new, Tensor v_new, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor(c!) kv_lens, "
             "Tensor? cos_sin_cache",
}
_KERNEL = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/core/stack.h>
namespace {
void results(const c10::OperatorHandle& op, torch::jit::Stack* stack) {  // (out like q, lse [b, h_q] fp32)
  auto n = op.schema().arguments().size();
  auto q = torch::jit::peek(*stack, 0, n).toTensor();
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, at::empty_like(q), at::empty({q.size(0), q.size(1)}, q.options().dtype(at::kFloat)));
}
}
TORCH_LIBRARY_IMPL(step_schema_cost, CompositeExplicitAutograd, m) {
""" + "".join(f'  m.impl("{name}", torch::CppFunction::makeFromBoxedFunction<&results>());\n'
              for name in SCHEMAS) + "}\n"


def _ops():
    library = torch.library.Library("step_schema_cost", "DEF")
    for name, schema in SCHEMAS.items():
        library.define(f"{name}({schema}) -> (Tensor, Tensor)")
        torch.library.register_fake(f"step_schema_cost::{name}",
                                    lambda q, *a: (torch.empty_like(q), q.new_empty(q.shape[:2])), lib=library)
    load_inline("step_schema_cost", cpp_sources=_KERNEL, is_python_module=False, verbose=False)
    _ops.keep = library
    return torch.ops.step_schema_cost


def per_call_us(fn, args, calls=3000) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    ops = _ops()
    q = torch.randn(1, 32, 128)
    k, v = torch.randn(1, 8, 128), torch.randn(1, 8, 128)
    k_cache, v_cache = torch.randn(1, 8, 64, 128), torch.randn(1, 8, 64, 128)
    lens, table, y = torch.full((1,), 63, dtype=torch.int32), torch.rand(4096, 128), torch.randn(64)
    step = (q, k, v, k_cache, v_cache, lens)
    constants = ("bhsd", None, 0, None, None, None, None, table, None, None, 1.0, 1.0, False, None, 0, None, None,
                 1e-6, None, None, None, False)
    args = {"step28": constants, "step28_unannotated": constants,
            "step13": (None, None, table, None, None, None, "bhsd;cos_sin_cache"), "step7": (table,)}
    paths = {"torch add_ [eager]": (lambda t: t.add_(1.0), (y,))}
    paths.update({f"{name} [eager]": (getattr(ops, name).default, step + a) for name, a in args.items()})
    bodies = {"torch add_, one input": (lambda t: t.add_(1.0), (y,)),
              "torch add_ on kv_lens, the six inputs given": (lambda q, k, v, kc, vc, lens: lens.add_(1), step)}
    bodies.update({name: (lambda *t, op=getattr(ops, name), a=a: op(*t, *a), step) for name, a in args.items()})
    for label, (body, inputs) in bodies.items():
        fn = torch.compile(body, fullgraph=True)
        for _ in range(20):
            fn(*inputs)
        paths[f"{label} [compiled]"] = (fn, inputs)
    figures = {label: [] for label in paths}
    for _ in range(7):
        for label, (fn, inputs) in paths.items():
            figures[label].append(per_call_us(fn, inputs))
    print(f"torch {torch.__version__}, CPU tensors; median / best of 7 rounds, µs a call")
    for label, f in figures.items():
        print(f"{statistics.median(f):8.2f} {min(f):8.2f}  {label}")


if __name__ == "__main__":
    main()
