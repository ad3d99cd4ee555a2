"""cukiln.rope and cukiln.rope_qk: rotary position embedding for sbhd, bshd and packed thd tensors of any strides,
without copies; rope_qk rotates q and k of the same tokens together, with each token's angles computed once. Their
schemas (the one declaration of their arguments), their planner (rope_plan.plan_rope on the call's TensorInfos) and
their public functions, built from the schemas (runtime/binder.py).
"""

from __future__ import annotations

import contextlib
from . import rotary
from .calls import Call, OpRuntime, bind, takes
from .kv_append_api import RENAMED_SCALE, STREAM
from .launch import kernel
from .overrides import CURRENT as OVERRIDES
from .rope_plan import RopePlan, plan_rope
from .schema import Arg, OpSchema, Result
from .tensors import FLOATS, INTS, from_torch

# The arguments after the rotated tensors, rope's and rope_qk's alike
_ANGLES_AND_POSITIONS = rotary.args(mrope=True, doc_scale="positions times it, for inv_freq and base angles") + (
    Arg("layout", "str", "sbhd", "[s, b, h, d] (sbhd), [b, s, h, d] (bshd) or packed [t, h, d] (thd)"),
    Arg("positions", "Tensor", None, "explicit positions, read as given: [s] or [b, s] int32/int64 ([t] for thd, "
        "which then needs no cu_seqlens; [3, ...] for M-RoPE); default: the index in the sequence plus offsets",
        optional=True, dtypes=INTS),
    Arg("offsets", "IntOrTensor", None, "added to each index in the sequence: an int, or an int tensor [b] (one "
        "per sequence)", optional=True, op_names=("offsets_tensor", "offset"), int_optional=True, dtypes=INTS),
    Arg("cu_seqlens", "Tensor", None, "thd: int32 [b + 1] sequence boundaries, on x's device (never read back: a "
        "malformed one gives NaN rows) or on the CPU (checked, then copied over); tokens past the last sequence "
        "are left alone", optional=True, dtypes=("int32",)),
    Arg("cp_size", "int", 1, "context parallel: TransformerEngine's load-balanced split, each sequence in "
        "2 * cp_size chunks of which this rank holds chunks cp_rank and 2 * cp_size - 1 - cp_rank (thd: cu_seqlens "
        "are the global offsets)"),
    Arg("cp_rank", "int", 0, "context parallel: this rank"),
    Arg("max_seqlen", "SymInt", None, "thd: the longest global sequence, which lets the token/grid rule consider "
        "grid dispatch (CUKILN_ROPE_THD_DISPATCH=token|grid|auto overrides the rule)", optional=True),
    Arg("backward", "bool", False, "apply the exact vector-Jacobian product of the forward to a gradient"),
    Arg("inplace", "bool", False, "rotate the input itself, reading and writing only the rotated features",
        role="flag", rank=0),
)
_NOTES = """A position outside a table that only the device knows makes that token's rotated features NaN; nothing is read
out of bounds. Angles are reduced in double precision, so large positions keep fp32 accuracy.
Runs on the current torch stream without synchronizing (``stream=`` picks another); CuPy, JAX or any
``__dlpack__`` / ``__cuda_array_interface__`` arrays are taken without a copy and the result comes back in the
input's framework (see cukiln.interop).
Autograd does not see this call: with grad mode on, an input, output or angle table that requires grad is refused
(cukiln.torch.rope and cukiln.torch.rope_qk are the differentiable forms); inside an autograd.Function, or detached,
it runs."""

SCHEMA = OpSchema(
    "rope",
    (Arg("x", "Tensor", doc="[s, b, h, d] (sbhd), [b, s, h, d] (bshd) or packed [t, h, d] (thd), fp32/fp16/bf16, any "
         "strides (a permuted view runs without a copy), on a CUDA device", positional=True, dtypes=FLOATS,
         refuse_grad=True),)
    + _ANGLES_AND_POSITIONS
    + (Arg("out", "Tensor", None, "where the result goes (allocated like x when None); the features outside the "
           "rotated span are copied over", optional=True, role="out", suffix="#out", rank=1, dtypes=FLOATS,
           refuse_grad=True, with_inplace=False),
       STREAM, RENAMED_SCALE),
    (Result("out", in_place_of="x"),),
    "Rotate features [rotary_offset, rotary_offset + rotary_dim) of every head of x by position-dependent angles; "
    "returns the output tensor.\n\n" + _NOTES,
    inplace_op="rope_")

QK_SCHEMA = OpSchema(
    "rope_qk",
    (Arg("q", "Tensor", doc="as rope's x", positional=True, dtypes=FLOATS, refuse_grad=True),
     Arg("k", "Tensor", doc="k of the same tokens: any head count and strides (e.g. the next slice of a fused "
         "projection), or None (q alone, k_out None)", positional=True, optional=True, dtypes=FLOATS,
         refuse_grad=True))
    + _ANGLES_AND_POSITIONS
    + (Arg("out", "Tensor", None, "a pair (q_out, k_out), or None (both allocated)", optional=True, role="out",
           suffix="#out", rank=1, dtypes=FLOATS, refuse_grad=True, with_inplace=False, parts=("q_out", "k_out")),
       STREAM, RENAMED_SCALE),
    (Result("q_out", in_place_of="q"), Result("k_out", in_place_of="k")),
    "cukiln.rope on q and k of the same tokens at once: (q_out, k_out). Each token's angles are computed once, for "
    "all of its q and k heads, in one launch (dense layouts with the last dim contiguous; packed thd sequences and "
    "strided last dims take a second launch for k).\n\n" + _NOTES,
    inplace_op="rope_qk_")

_RULE: list = [None]  # the dense launch rule a measurement plans with (plan_call's rule=), else None


def plan(call: Call):
    """The plan of a rope or rope_qk call: one launch, or (rope_qk where no _qk variant serves the call) a second
    for k. The planner's RopePlan kept as ``plan.detail``."""
    import torch

    pair = call.schema is QK_SCHEMA
    x_name, out_name = ("q", "q_out") if pair else ("x", "out")
    x, k = call[x_name], call["k"] if pair else None
    if not isinstance(x, torch.Tensor):
        from_torch(x, x_name, FLOATS)  # the TypeError naming x
    cu, cu_host = call["cu_seqlens"], None
    if isinstance(cu, torch.Tensor) and not cu.is_cuda:  # host values: checked by the planner, copied over
        if cu.dtype != torch.int32 and not (call.validating and cu.dtype == torch.int64):
            raise TypeError(f"cu_seqlens: expected int32, got {str(cu.dtype).replace('torch.', '')}")
        cu_host = tuple(cu.tolist())
        call.substitute("cu_seqlens", cu.to(x.device))
    given_out, given_k_out = call.given.get(out_name), call.given.get("k_out")
    inplace, same_address = call.form.inplace, False
    if inplace:
        if given_out is not None and given_out is not x:
            raise ValueError(f"out: inplace=True writes {x_name} itself; got a different out tensor")
        if given_k_out is not None and given_k_out is not k:
            raise ValueError("k_out: inplace=True writes k itself; got a different k_out tensor")
        call.alias(out_name, x_name)
        if k is not None:
            call.alias("k_out", "k")
    elif given_out is None:
        if given_k_out is not None:
            raise ValueError("out: give both q_out and k_out, or neither")
        call.allocate(out_name, torch.empty_like(x))
        if k is not None:
            call.allocate("k_out", torch.empty_like(k))
    elif k is not None and given_k_out is None:
        raise ValueError("out: give both q_out and k_out, or neither")
    if pair and k is None and given_k_out is not None:
        raise ValueError("out: k_out given without k")
    arguments = call.arguments()
    xi, oi = arguments[x_name], arguments[out_name]
    ki, koi = (arguments["k"], arguments["k_out"]) if pair and k is not None else (None, None)
    if not inplace and given_out is not None:  # an output given at x's own address is x rotated in place
        same_address = oi.same_view(xi) or (ki is not None and koi.same_view(ki))
    tables = ("freqs", "cos", "sin", "cos_sin_cache", "inv_freq", "positions", "offsets", "cu_seqlens")
    guarded = tuple((n, arguments[n]) for n in tables if arguments[n] is not None and type(arguments[n]) is not int)
    layout = call["layout"]
    p = plan_rope(**takes(plan_rope, {**arguments, "x": xi, "out": oi, "k": ki, "k_out": koi}),
                  cu_seqlens_host=cu_host, thd_dispatch=OVERRIDES["rope_thd_dispatch"] if layout == "thd" else "auto",
                  arch=call.arch(xi.device), guarded=guarded, rule=_RULE[0], sms=call.sms(xi.device),
                  tuning=call.tuning(xi.device))
    names = {"x": x_name, "out": out_name}
    launches, part = [], p
    while part is not None:
        launches.append(call.launch(call.bind(part.device, part.module, part.symbol, part.fmt, part.grid,
                                              part.block, 0, part.overlap_previous), part.field_names, part.values,
                                    [(f, names.get(n, n), add) for f, n, add in part.pointers]))
        part = part.then
    written = [out_name] + (["k_out"] if k is not None else [])
    in_place = inplace or same_address
    checked = [n for n in call.tensor_names() if not (in_place and n in (x_name, "k"))]
    if inplace and k is not None:
        checked.append("k")  # q rotated in place against k rotated in place
    result = call.plan(xi.device, launches, overlaps=call.overlaps(written, checked))
    result.peculiar = same_address
    result.detail = p
    return result


RUNTIME = OpRuntime(SCHEMA, plan, torch_module="rope_torch")
QK_RUNTIME = OpRuntime(QK_SCHEMA, plan, torch_module="rope_torch")
RUNTIMES = {"rope": RUNTIME, "rope_qk": QK_RUNTIME}
rope, _planned, arguments, _ = bind(RUNTIME)  # plan_call below: rope's own, rope_qk's plans too
rope_qk, _planned_qk, qk_arguments, _ = bind(QK_RUNTIME)


def plan_call(x, *, rule: dict | None = None, k=None, k_out=None, **kwargs) -> tuple[RopePlan | None, object]:
    """Validate a rope() call (the keyword arguments of cukiln.rope) and plan its launch without launching:
    (RopePlan or None when there is nothing to launch, output tensor). ``rule``: the dense launch choices to
    plan with instead of the dispatch table's (as `cukiln tune rope` measures them). For rope_qk's plans give ``k=``
    (and ``k_out=``); the plan's ``then`` is k's own launch where one is needed."""
    with _ruled(rule):
        if k is None:
            planned = _planned(x, **kwargs)
            return planned.detail, planned.call["out"]
        out = kwargs.pop("out", None)
        planned = _planned_qk(x, k, out=None if out is None and k_out is None else (out, k_out), **kwargs)
        return planned.detail, planned.call["q_out"]


@contextlib.contextmanager
def _ruled(rule):
    _RULE[0] = rule
    try:
        yield
    finally:
        _RULE[0] = None


def launch_plan(plan: RopePlan) -> None:
    """Launch a plan from plan_call on the current torch stream (measurements: the call's launch, without its
    validation)."""
    import torch

    kernel(plan.device, plan.module, plan.symbol, plan.fmt, plan.grid, plan.block, 0, plan.overlap_previous)(
        plan.values, torch._C._cuda_getCurrentRawStream(plan.device))
