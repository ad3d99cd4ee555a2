"""The floor under a cukiln op call, compiled and through the dispatcher (GPU): each compiled function of `cukiln bench
overhead`, in default mode and under reduce-overhead, beside the same function around a *call probe*, a C++ op with
the schema of the op the compiled call runs (the op specialized to the call's constants, runtime/specialize.py)
whose kernels do nothing but what every call must: its Autograd-key kernel redispatches, as cukiln's gate does, and
its CUDA kernel allocates the results as cukiln's hot path does (torch's caching allocator without the dispatcher)
and launches nothing. Each runs in turns with its mode's reference (compiled ``add_``; under reduce-overhead
captured ``y + 1.0``, as the bench pairs them) in short blocks (tools/overhead.py's paired_round), with the same
inputs marked static as the bench's rows.

Default mode: the probe pays what torch charges a call of this shape inside a compiled graph: the guards on each input
and closed-over tensor, the size and stride asserts, the op call's argument parsing from Python, the dispatcher and
the results' wrapping. So ``probe - compiled add_`` is torch's own price of the call's shape beyond compiled ``add_``
(whose Triton launch the probe does not pay), and ``cukiln - probe`` is cukiln's own work: its gate, plan-cache hit,
checks and the kernel's launch. A call that launches a kernel cannot cost less than its probe plus a driver launch.

Reduce-overhead: once captured, a call replays its graph and runs no op at all, so what a call costs is torch's work
around the replay (guards, the copies of inputs that are not static into the graph's buffers, the static inputs'
checks, the outputs), which the probe's captured function pays for the same inputs and outputs; its graph holds no
kernel, so it replays no slower than one that does. ``probe - captured y + 1.0`` is a floor under any op of that
shape; whether torch captured each function is recorded too.

Eager, through the dispatcher: the bench's op rows (each op as itself, with its 12-28 arguments, and rope_,
decode_attention and decode_step specialized to the call's constants), each beside its probe called alike, paired
with eager ``add_`` and held against it as a ratio, as the bench holds them (timed first, before anything is
compiled, as the bench times them). ``probe : add_`` is what the dispatcher charges a call of that schema, a floor
under any op of it.

    python benchmarks/compiled_bounds.py OUT_DIR [--rounds N]

Writes OUT_DIR/compiled-bounds.json (µs per call of each path's rounds, and per round its figure against the
reference: a ratio for the eager rows, a difference in µs for the compiled ones) and prints a table of medians over
rounds of those paired figures.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import types

import torch

import cukiln
import cukiln.torch as ct
from cukiln import rope_api, specialize
from cukiln.tools.decode_step import bench as decode_step_bench
from cukiln.tools.overhead import difference, distinct, paired_round, python_calls, ratio
from cukiln.tools.timing import run_metadata

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
    if hasattr(torch.ops.cukiln_call_probe, name):  # probed already, by another case
        return getattr(torch.ops.cukiln_call_probe, name).default
    library.define(str(op._schema).split("::", 1)[1])
    returns = len(op._schema.returns)

    def fake(*args):
        first = next(a for a in args if isinstance(a, torch.Tensor))
        made = tuple(torch.empty_like(first) for _ in range(returns))
        return None if returns == 0 else made[0] if returns == 1 else made

    torch.library.register_fake(f"cukiln_call_probe::{name}", fake, lib=library)
    module.register_probe(name)
    return getattr(torch.ops.cukiln_call_probe, name).default


def example_inputs() -> types.SimpleNamespace:
    """The tiny inputs of the overhead bench's compiled functions (one token; GQA 32/8, head dim 128): x and freqs
    for rope, one token's fused projection qkv with a cos|sin cache table and its positions for rope_qk, q and the
    caches k, v (64 positions) for decode_attention, and the decode step's case s with its six tensors, step."""
    s = decode_step_bench.setup_case(decode_step_bench.SETS[0], 1, 64)
    k = torch.randn(1, 8, 64, 128, device="cuda", dtype=torch.bfloat16)
    return types.SimpleNamespace(
        x=torch.randn(1, 1, 1, 64, device="cuda"), freqs=torch.rand(1, 64, device="cuda"),
        qkv=torch.randn(1, 48 * 128, device="cuda", dtype=torch.bfloat16), table=torch.rand(4096, 128, device="cuda"),
        positions=torch.zeros(1, device="cuda", dtype=torch.int64),
        q=torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16), k=k, v=torch.randn_like(k), s=s,
        step=tuple(s[name] for name in ("q", "k", "v", "k_cache", "v_cache", "lens")))


def yes_no(pair: dict) -> str:
    """A table cell of two sides' answers ("yes/no"), empty where the first has none."""
    values = list(pair.values())
    return "" if values[0] is None else "/".join("yes" if v else "no" for v in values)


def cases() -> dict:
    """label -> (mode, the cukiln function, the same function around its op's probe, their arguments, which of them
    are static addresses): the compiled functions of `cukiln bench overhead`, default mode and reduce-overhead, and
    its ops called through the dispatcher (mode "eager": the op and its probe themselves)."""
    def rope_args(**given):  # rope's op arguments after x, for cukiln.rope(x, **given)
        return rope_api.arguments(e.x, **given)[0][1:]

    e = example_inputs()
    x, freqs, qkv, table, positions, q, k, v, s, step = (e.x, e.freqs, e.qkv, e.table, e.positions, e.q, e.k, e.v,
                                                          e.s, e.step)

    def qk(qkv):  # q and k sliced from one token's fused projection inside the function, as a serving step does
        return qkv[:, :4096].view(1, 32, 128), qkv[:, 4096:5120].view(1, 8, 128)

    def probed(name, args, lse=True):
        """The probe of op ``name`` specialized to ``args``, and the specialization's arguments."""
        op, given = specialize.specialization(name, args, lse)
        return probe_of(op), given

    def swap(given, inputs):
        """A function of the compiled function's own tensors (in the places of the example ``inputs``, found in
        ``given`` by identity here, outside the traced code) to the arguments its probe takes: ``given`` with
        those tensors in place of the examples."""
        places = {id(t): i for i, t in enumerate(inputs)}
        slots = [(places.get(id(a)), None if id(a) in places else a) for a in given]  # no example left to guard
        return lambda *tensors: tuple(a if i is None else tensors[i] for i, a in slots)

    example_q, example_k = qk(qkv)
    op_args = {  # each op's arguments in the calls below (the overhead bench's op rows call them so)
        "rope_": (x, *rope_args(base=10000.0)), "rope": (x, *rope_args(base=10000.0)),
        "rope_qk_": (example_q, example_k, *rope_args(cos_sin_cache=table, positions=positions, layout="thd")),
        "decode_attention": (q, k, v, None, 64, "bhsd", None, 0, None, None, None, False),
        "decode_step": (*step, "bhsd", None, 0, None, None, None, None, s["cos_sin"], None, None, 1.0, 1.0, False,
                        None, 0, None, None, 1e-6, None, None, None, False)}
    rope_, rope_given = probed("rope_", op_args["rope_"])
    rope, alloc_given = probed("rope", (x, *rope_args(freqs=freqs)))
    rope_base, base_given = probed("rope", op_args["rope"])
    qk_, qk_given = probed("rope_qk_", op_args["rope_qk_"])
    decode, decode_given = probed("decode_attention", op_args["decode_attention"], lse=False)
    step_op, step_given = probed("decode_step", op_args["decode_step"], lse=False)
    rope_swap, alloc_swap, base_swap = (swap(g, (x,)) for g in (rope_given, alloc_given, base_given))
    qk_swap, decode_swap = swap(qk_given, (example_q, example_k, table)), swap(decode_given, (q, k, v))
    step_swap = swap(step_given, step)
    # static copies of their own, so that marking them leaves the other cases' as they are
    caches = k.clone(), v.clone()
    static_table = table.clone()

    def cukiln_qk(qkv, cache=table):
        ct.rope_qk(*qk(qkv), cos_sin_cache=cache, positions=positions, layout="thd", inplace=True)
        return qkv

    def probe_qk(qkv, cache=table):
        qk_(*qk_swap(*qk(qkv), cache))
        return qkv

    def probe_rope_(t):
        rope_(*rope_swap(t))
        return t

    rope_in_place = lambda t: ct.rope(t, base=10000.0, inplace=True)  # noqa: E731
    rope_allocating = lambda t: ct.rope(t, base=10000.0)  # noqa: E731
    probe_allocating = lambda t: rope_base(*base_swap(t))  # noqa: E731
    cukiln_decode = lambda t, kc=k, vc=v: ct.decode_attention(t, kc, vc, 64)  # noqa: E731
    probe_decode = lambda t, kc=k, vc=v: decode(*decode_swap(t, kc, vc))  # noqa: E731
    cukiln_step = lambda *t: ct.decode_step(*t, cos_sin_cache=s["cos_sin"])  # noqa: E731
    probe_step = lambda *t: step_op(*step_swap(*t))  # noqa: E731
    reduce = "reduce-overhead"
    static_step = tuple(t.clone() for t in step)
    cases = [
        (None, "rope in place (base)", rope_in_place, probe_rope_, (x,), ()),
        (None, "rope allocating (freqs)", lambda t: ct.rope(t, freqs=freqs),
         lambda t: rope(*alloc_swap(t)), (x,), ()),
        (None, "rope_qk in place (q and k sliced inside)", cukiln_qk, probe_qk, (qkv,), ()),
        (None, "decode_attention (b=1, T=64)", cukiln_decode, probe_decode, (q,), ()),
        (None, "decode_step (b=1, T=64, device lengths)", cukiln_step, probe_step, step, ()),
        # the overhead bench's reduce-overhead rows, each with the same inputs static
        (reduce, "rope allocating (base)", rope_allocating, probe_allocating, (x,), ()),
        (reduce, "rope in place (base), x static", rope_in_place, probe_rope_, (x.clone(),), (0,)),
        (reduce, "rope_qk in place, qkv static", cukiln_qk, probe_qk, (qkv.clone(),), (0,)),
        (reduce, "rope_qk in place, qkv and the cos|sin cache static", cukiln_qk, probe_qk,
         (qkv.clone(), static_table), (0, 1)),
        (reduce, "decode_attention (b=1, T=64)", cukiln_decode, probe_decode, (q,), ()),
        (reduce, "decode_attention, caches static", cukiln_decode, probe_decode, (q, *caches), (1, 2)),
        (reduce, "decode_step, every input static", cukiln_step, probe_step, static_step, tuple(range(6))),
        *_dispatcher_cases(op_args),
    ]
    return {f"{mode or 'default'}: {label}": (mode, *rest) for mode, label, *rest in cases}


def _dispatcher_cases(op_args: dict) -> list:
    """The overhead bench's rows of ops called eagerly through the dispatcher (each op as itself, and rope_,
    decode_attention and decode_step specialized to the call's constants), each beside its probe called alike."""
    found = []
    for name, args in op_args.items():
        generic = getattr(torch.ops.cukiln, name).default
        found.append(("eager", f"op {name} through the dispatcher", generic.overloadpacket,
                      probe_of(generic).overloadpacket, args, ()))
    for name in ("rope_", "decode_attention", "decode_step"):
        op, given = specialize.specialization(name, op_args[name])
        found.append(("eager", f"op {name} specialized to the call's constants, through the dispatcher",
                      op.overloadpacket, probe_of(op).overloadpacket, tuple(given), ()))
    return found


def compile_case(mode, body, args, static):
    """A zero-argument call of torch.compile(fullgraph=True, mode=mode) of ``body`` on ``args`` (the tensors at
    indices ``static`` marked as static addresses; mode "eager": ``body`` itself), warmed: planned, compiled and, in
    reduce-overhead mode, recorded; with whether torch captured it in a CUDA graph (``captured``: None outside
    reduce-overhead)."""
    from torch._dynamo.utils import counters

    if mode == "eager":  # called as it is, through the dispatcher, its plan made by a first call outside the timing
        call = lambda: body(*args)  # noqa: E731
        call()
        call.captured = None
        return call
    for i in static:
        torch._dynamo.mark_static_address(args[i])
    compiled = torch.compile(distinct(body), fullgraph=True, mode=mode)
    skips = counters["inductor"]["cudagraph_skips"]
    for _ in range(50):
        compiled(*args)
    call = lambda: compiled(*args)  # noqa: E731
    call.captured = None if mode is None else counters["inductor"]["cudagraph_skips"] == skips
    return call


def main(out_dir: str, rounds: int) -> None:
    y = torch.randn(1, 1, 1, 64, device="cuda")
    found = cases()
    references = {"eager": ("y.add_(1.0)", lambda: y.add_(1.0))}
    paths, times, over, sent = {}, {}, {}, {}
    # the eager rows first, before anything is compiled (a process that has run a reduce-overhead function pays more
    # for every eager call, as the overhead bench found), then the compiled ones
    for phase in ("eager", "compiled"):
        labels = [label for label, (mode, *_) in found.items() if (mode == "eager") == (phase == "eager")]
        if phase == "compiled":
            references[None] = ("compiled y.add_(1.0)", compile_case(None, lambda t: t.add_(1.0), (y,), ()))
            references["reduce-overhead"] = ("compiled y + 1.0, reduce-overhead",
                                             compile_case("reduce-overhead", lambda t: t + 1.0, (y,), ()))
        keys = [(label, side) for label in labels for side in ("cukiln", "probe")]
        for label, side in keys:
            mode, body, probe_body, args, static = found[label]
            paths[label, side] = compile_case(mode, body if side == "cukiln" else probe_body, args, static)
            times[label, side], over[label, side], sent[label, side] = [], [], 0
        torch.cuda.synchronize()
        for _ in range(rounds):
            for key in keys:  # in turns with the reference, in short blocks (as the overhead bench pairs)
                mode = found[key[0]][0]
                before = python_calls()
                own, figure = paired_round(paths[key], references[mode][1], ratio if mode == "eager" else difference,
                                           CALLS)
                sent[key] += python_calls() - before  # none where the row timed the native path it names
                times[key].append(own)
                over[key].append(figure)
    rows = {}
    for label, (mode, *_) in found.items():
        cukiln_over, probe_over = over[label, "cukiln"], over[label, "probe"]
        rows[label] = {
            "mode": mode or "default", "reference": references[mode][0],
            "figure": "ratio" if mode == "eager" else "difference_us",
            "captured": {side: paths[label, side].captured for side in ("cukiln", "probe")},
            "cukiln_us": times[label, "cukiln"], "probe_us": times[label, "probe"],
            "cukiln_python_calls": sent[label, "cukiln"],
            "cukiln_over_reference": cukiln_over, "probe_over_reference": probe_over,
            "medians": {"cukiln_over_reference": statistics.median(cukiln_over),
                        "probe_over_reference": statistics.median(probe_over),
                        "cukiln_over_probe": statistics.median([a - b for a, b in zip(cukiln_over, probe_over)])}}
    result = {**run_metadata("compiled-bounds", f"python benchmarks/compiled_bounds.py OUT_DIR --rounds {rounds}"),
              "cukiln": cukiln.__version__, "calls": CALLS, "rounds": rounds, "cases": rows}
    with open(f"{out_dir}/compiled-bounds.json", "w") as f:
        json.dump(result, f, indent=1)
    print(f"medians over {rounds} rounds of per-round figures (each round's: the median over its pairs of blocks, the "
          "reference's then the path's): eager, the ratio to add_; compiled, the difference in µs to compiled add_ "
          "(default mode) or captured y + 1.0 (reduce-overhead)")
    print(f"{'cukiln : ref':>13} {'probe : ref':>12} {'cukiln - probe':>15} {'captured':>9}  mode: function")
    for label, row in rows.items():
        m = row["medians"]
        print(f"{m['cukiln_over_reference']:13.2f} {m['probe_over_reference']:12.2f} "
              f"{m['cukiln_over_probe']:15.2f} {yes_no(row['captured']):>9}  {label}")
    sent = [f"{label} ({row['cukiln_python_calls']} calls)" for label, row in rows.items()
            if row["cukiln_python_calls"]]
    if sent:
        print("served by Python while timed, not by the native hot path: " + "; ".join(sent))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(arguments[0], int(arguments[arguments.index("--rounds") + 1]) if "--rounds" in arguments else 9)
