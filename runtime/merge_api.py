"""cukiln.merge_attention: partial attention results over disjoint key sets (a decode sharded across GPUs, pages,
splits) merged into the attention over their union, in one launch. Its schema (the one declaration of its arguments),
its planner (merge_plan.plan_merge) and its public function, built from the schema (runtime/binder.py).
"""

from __future__ import annotations

from .calls import Call, OpRuntime, bind, takes
from .kv_append_api import SINKS, STREAM
from .merge_plan import plan_merge
from .schema import Arg, OpSchema, Result, changed
from .tensors import HALVES

SCHEMA = OpSchema(
    "merge_attention",
    (Arg("outs", "Tensor", doc="[k, b, h, d]: k partial attention outputs of each row and head, each over a key set "
         "of its own (fp16 or bf16, any strides): decode_attention's out on each part", positional=True, dtypes=HALVES,
         refuse_grad=True),
     Arg("lses", "Tensor", doc="[k, b, h] fp32, any strides: each part's natural-log log-sum-exp (decode_attention's "
         "lse; -inf for a part without keys)", positional=True, dtypes=("fp32",), refuse_grad=True),
     Arg("out", "Tensor", None, "[b, h, d] output of outs' dtype (allocated when None)", optional=True, role="out",
         suffix="#out", rank=1, dtypes=HALVES, refuse_grad=True),
     Arg("return_lse", "bool", False, "also return the merged log-sum-exp, fp32 [b, h]", role="flag",
         suffix="!#no_lse", rank=3),
     changed((SINKS,), sinks={"doc": "attention sinks: fp32 [h] on outs' device, any stride, each head's logit as one "
                                     "more part of output zero (gpt-oss's definition: decode_attention's sinks)"})[0],
     STREAM),
    (Result("out"), Result("lse", only_with="return_lse")),
    """The attention over the union of k disjoint key sets from each set's result: out = sum of exp(lse_i - lse) *
out_i over the parts, lse = log(sum of exp(lse_i)), in fp32, one launch (a block a row and head). A row and head whose
parts are all empty (every lse -inf) gets zeros and -inf; a NaN lse in any part makes its output and lse NaN. Runs on
the current torch stream without synchronizing; CUDA-graph capturable. Not differentiable.""")


def plan(call: Call):
    """The plan of a merge_attention call; the planner's MergePlan kept as ``plan.detail``."""
    import torch

    outs = call["outs"]
    if isinstance(outs, torch.Tensor) and outs.ndim == 4:
        call.output("out", lambda: torch.empty(outs.shape[1:], dtype=outs.dtype, device=outs.device))
    if call.form.flags.get("return_lse") and isinstance(outs, torch.Tensor) and outs.ndim == 4:
        call.output("lse", lambda: torch.empty(outs.shape[1:3], dtype=torch.float32, device=outs.device))
    wanted = call.form.flags.get("return_lse")
    p = plan_merge(**takes(plan_merge, call.arguments()), lse=call.info("lse") if wanted else None,
                   arch=call.arch(call.info("outs").device))
    launches = []
    if p is not None:
        pointers = [(f, f, 0) for f in ("outs", "lses", "out", "lse", "sinks")
                    if (f != "lse" or wanted) and (f != "sinks" or call["sinks"] is not None)]
        a = p.launch
        launches.append(call.launch(call.bind(p.device, a.module, a.symbol, a.fmt, a.grid, a.block, a.shared,
                                              a.overlap_previous), a.field_names, p.values, pointers))
    result = call.plan(call.info("outs").device, launches,
                       overlaps=call.overlaps(["out", "lse"], ["outs", "lses", "sinks"]))
    result.detail = p
    return result


RUNTIME = OpRuntime(SCHEMA, plan, torch_module="merge_torch")
merge_attention, planned, arguments, plan_call = bind(RUNTIME)  # plan_call: the planner's MergePlan
