"""The floor under a torch.compile'd cukiln call (GPU): each compiled function of `cukiln bench overhead`, beside the
same function around a *call probe*, a C++ op with the schema of the op the compiled call runs (the op specialized
to the call's constants, runtime/specialize.py) whose kernels do nothing but what every call must: its Autograd-key
kernel redispatches, as cukiln's gate does, and its CUDA kernel allocates the results as cukiln's hot path does
(torch's caching allocator without the dispatcher) and launches nothing. Each of the two runs in turns with compiled
``add_`` in every round, in short blocks (tools/overhead.py's paired_round, as the overhead bench pairs; the results
of 2026-11-27 were timed before, one block of CALLS calls each).

The probe pays what torch charges a call of this shape inside a compiled graph: the guards on each input and
closed-over tensor, the size and stride asserts, the op call's argument parsing from Python, the dispatcher and the
results' wrapping. So ``probe - compiled add_`` is torch's own price of the call's shape beyond compiled ``add_``
(whose Triton launch the probe does not pay), and ``cukiln - probe`` is cukiln's own work: its gate, plan-cache hit,
checks and the kernel's launch. A call that launches a kernel cannot cost less than its probe plus a driver launch.

    python benchmarks/compiled_bounds.py OUT_DIR [--rounds N]

Writes OUT_DIR/compiled-bounds.json (µs per call: each path's rounds, and per round the differences) and prints a
table of medians over rounds of the paired differences.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

import cukiln
import cukiln.torch as ct
from cukiln import rope_api, rope_torch, specialize
from cukiln.tools import decode_step_bench
from cukiln.tools.overhead import paired_round

CALLS = 5000

_PROBE = r"""
#include <torch/extension.h>
#include <torch/library.h>
#include <ATen/EmptyTensor.h>
#include <atomic>
#include <memory>
#include <vector>

namespace {
std::atomic<c10::Allocator*> cuda_allocator{nullptr};

// A tensor like t, allocated as cukiln's hot path allocates (the first through at::empty_like, which names torch's
// CUDA allocator; the rest straight from that allocator, without the dispatcher).
at::Tensor fresh_like(const at::Tensor& t) {
  c10::Allocator* allocator = cuda_allocator.load();
  if (allocator == nullptr) {
    at::Tensor first = at::empty_like(t);
    cuda_allocator.store(first.storage().allocator());
    return first;
  }
  c10::DeviceGuard guard(t.device());
  return at::Tensor(at::detail::empty_strided_generic(t.sizes(), t.strides(), allocator,
                                                      c10::DispatchKeySet(c10::DispatchKey::CUDA), t.scalar_type()));
}

// The probe's CUDA kernel: the arguments dropped, each result a fresh tensor like the first tensor argument (the
// shape of every result of the calls probed here).
void results_only(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t count = op.schema().arguments().size();
  at::Tensor first;
  for (const auto& v : torch::jit::last(*stack, count)) {
    if (v.isTensor()) {
      first = v.toTensor();
      break;
    }
  }
  torch::jit::drop(*stack, count);
  for (size_t i = 0; i < op.schema().returns().size(); ++i) torch::jit::push(*stack, fresh_like(first));
}

// The probe's Autograd kernel: below autograd, as cukiln's gate sends a call that needs no gradient.
void below_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}
}  // namespace

void register_probe(const std::string& name) {
  static auto* kept = new std::vector<std::unique_ptr<torch::Library>>();
  for (auto key : {c10::DispatchKey::CUDA, c10::DispatchKey::Autograd}) {
    kept->push_back(std::make_unique<torch::Library>(torch::Library::IMPL, "cukiln_call_probe", key, __FILE__,
                                                     __LINE__));
  }
  kept->at(kept->size() - 2)->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&results_only>());
  kept->back()->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&below_autograd>());
}
"""

_LIBRARY = []


def probe_of(op):
    """cukiln_call_probe::<the name of ``op``>: ``op``'s schema (a specialized cukiln op's), with the kernels above and
    a fake kernel of the same results."""
    if not _LIBRARY:
        from torch.utils.cpp_extension import load_inline

        start = time.perf_counter()
        module = load_inline("cukiln_call_probe", cpp_sources=_PROBE, functions=["register_probe"], verbose=False)
        print(f"call probes built in {time.perf_counter() - start:.1f} s")
        _LIBRARY.extend((torch.library.Library("cukiln_call_probe", "DEF"), module))
    library, module = _LIBRARY
    name = op.name().split("::")[1]
    library.define(str(op._schema).split("::", 1)[1])
    returns = len(op._schema.returns)

    def fake(*args):
        first = next(a for a in args if isinstance(a, torch.Tensor))
        made = tuple(torch.empty_like(first) for _ in range(returns))
        return None if returns == 0 else made[0] if returns == 1 else made

    torch.library.register_fake(f"cukiln_call_probe::{name}", fake, lib=library)
    module.register_probe(name)
    return getattr(torch.ops.cukiln_call_probe, name).default


def cases() -> dict:
    """label -> (the cukiln function, the same function around its op's probe, their arguments): the compiled
    functions of `cukiln bench overhead`."""
    kw = rope_api.rope.__kwdefaults__
    rope_args = lambda **given: tuple(dict(kw, **given).get(n) for n in rope_torch.OP_ARGUMENTS)  # noqa: E731
    x = torch.randn(1, 1, 1, 64, device="cuda")
    freqs = torch.rand(1, 64, device="cuda")
    qkv = torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16)
    table = torch.rand(4096, 128, device="cuda")
    positions = torch.zeros(1, device="cuda", dtype=torch.int64)
    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    step = tuple(s[name] for name in ("q", "k", "v", "k_cache", "v_cache", "lens"))

    def qk(qkv):  # q and k sliced from one token's fused projection inside the function, as a serving step does
        return qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)

    def probed(name, args, tensors, lse=True):
        """The probe of op ``name`` specialized to ``args``, and the specialization's arguments after its first
        ``tensors`` (the function's own tensors)."""
        op, given = specialize.specialization(name, args, lse)
        return probe_of(op), given[tensors:]

    rope_, rope_rest = probed("rope_", (x, *rope_args(base=10000.0)), 1)
    rope, alloc_rest = probed("rope", (x, *rope_args(freqs=freqs)), 1)
    qk_, qk_rest = probed("rope_qk_", (*qk(qkv), *rope_args(cos_sin_cache=table, positions=positions, layout="thd")), 2)
    decode, decode_rest = probed("decode_attention", (q, k, v, None, 64, "bhsd", None, 0, None, None, None, False), 1,
                                 lse=False)
    step_args = (*step, "bhsd", None, 0, None, None, None, None, s["cos_sin"], None, None, 1.0, 1.0, False, None, 0,
                 None, None, 1e-6, None, None, None, False)
    step_op, step_rest = probed("decode_step", step_args, 6, lse=False)

    def cukiln_qk(qkv):
        ct.rope_qk(*qk(qkv), cos_sin_cache=table, positions=positions, layout="thd", inplace=True)
        return qkv

    def probe_qk(qkv):
        qk_(*qk(qkv), *qk_rest)
        return qkv

    def probe_rope_(t):
        rope_(t, *rope_rest)
        return t

    return {
        "rope in place (base)": (lambda t: ct.rope(t, base=10000.0, inplace=True), probe_rope_, (x,)),
        "rope allocating (freqs)": (lambda t: ct.rope(t, freqs=freqs), lambda t: rope(t, *alloc_rest), (x,)),
        "rope_qk in place (q and k sliced inside)": (cukiln_qk, probe_qk, (qkv,)),
        "decode_attention (b=1, T=64)": (lambda t: ct.decode_attention(t, k, v, 64),
                                         lambda t: decode(t, *decode_rest), (q,)),
        "decode_step (b=1, T=64, device lengths)": (lambda *t: ct.decode_step(*t, cos_sin_cache=s["cos_sin"]),
                                                    lambda *t: step_op(*t, *step_rest), step),
    }


def main(out_dir: str, rounds: int) -> None:
    y = torch.randn(1, 1, 1, 64, device="cuda")
    add = torch.compile(lambda t: t.add_(1.0), fullgraph=True)
    paths, found = {}, cases()
    for label, (body, probe_body, args) in found.items():
        for side, fn in (("cukiln", body), ("probe", probe_body)):
            compiled = torch.compile(fn, fullgraph=True)
            paths[label, side] = (lambda c=compiled, a=args: c(*a))
    reference = lambda: add(y)  # noqa: E731
    for fn in (reference, *paths.values()):  # compiled and warm
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    times = {key: [] for key in paths}
    over_add = {key: [] for key in paths}
    for _ in range(rounds):
        for key, fn in paths.items():  # in turns with compiled add_, in short blocks (as the overhead bench pairs)
            own, difference = paired_round(fn, reference, lambda a, b: a - b, CALLS)
            times[key].append(own)
            over_add[key].append(difference)
    rows = {}
    for label in found:
        cukiln_over, probe_over = over_add[label, "cukiln"], over_add[label, "probe"]
        rows[label] = {"cukiln_us": times[label, "cukiln"], "probe_us": times[label, "probe"],
                       "cukiln_over_compiled_add_us": cukiln_over, "probe_over_compiled_add_us": probe_over,
                       "medians": {"cukiln_over_compiled_add": statistics.median(cukiln_over),
                                   "probe_over_compiled_add": statistics.median(probe_over),
                                   "cukiln_over_probe": statistics.median(
                                       [a - b for a, b in zip(cukiln_over, probe_over)])}}
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cukiln": cukiln.__version__,
              "command": f"python benchmarks/compiled_bounds.py OUT_DIR --rounds {rounds}", "calls": CALLS,
              "rounds": rounds, "cases": rows}
    with open(f"{out_dir}/compiled-bounds.json", "w") as f:
        json.dump(result, f, indent=1)
    print(f"medians over {rounds} rounds of per-round differences, µs (each round's: the median over its pairs of "
          "blocks, compiled add_'s then the path's)")
    print(f"{'cukiln - add_':>14} {'probe - add_':>13} {'cukiln - probe':>15}  compiled function (fullgraph)")
    for label, row in rows.items():
        m = row["medians"]
        print(f"{m['cukiln_over_compiled_add']:14.2f} {m['probe_over_compiled_add']:13.2f} "
              f"{m['cukiln_over_probe']:15.2f}  {label}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(arguments[0], int(arguments[arguments.index("--rounds") + 1]) if "--rounds" in arguments else 15)
