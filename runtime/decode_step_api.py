"""cukiln.decode_step: one decode step of an attention layer, the new token appended and attended to: kv_append
(RoPE on the new query and key, the rotated key and the value written into the caches at each row's length), then
decode_attention over each row's keys including the new one.

With the lengths on the device and a step that the ws attention serves (sm_90 on, 16-bit caches of head dim 64 or
128, 16-byte rows), the step is one launch of a fused kernel (codegen/decode_step_family.py): each attention block
rotates its own query heads, and the block whose keys end with the new one writes it into the caches first. Else
two launches back to back (on GPUs with programmatic launches the attention is scheduled while the append runs and
waits for its writes), the rotated query and the new lengths in the step's workspace. Both give the same bits: the
step's attention takes the ws ring where the dispatch table picks ws_deep, whichever the launches
(decode_plan.plan_decode's for_step). ``cukiln.overrides.forced("decode_step_launch", "separate")`` (or
CUKILN_DECODE_STEP_LAUNCH) takes the two launches where the fused one would serve, for checks and measurements.
Its planner plans both ops' launches on the step's arguments (kv_append_api's and decode_api's), so the step adds
no planning rule of its own beyond the choice of the fused kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from cukiln.generated import dispatch

from . import decode_api, kv_append_api, rotary
from .calls import Call, OpRuntime, bind, fused, takes
from .decode_plan import SAME, WS
from .kv_append_api import BLOCK_TABLE, CACHE_SCALES, NEW_TOKENS, POSITIONS, QK_NORM, SINKS, STREAM
from .kv_append_plan import plan_kv_append
from .overrides import CURRENT as OVERRIDES
from .schema import Arg, OpSchema, Result, changed

SCHEMA = OpSchema(
    "decode_step",
    changed(NEW_TOKENS, q={"doc": "[b, h_q, d]: one new token a row"}, k_new={"doc": "[b, h_kv, d]"},
            v_new={"doc": "[b, h_kv, d]"}) + (
        Arg("kv_lens", "Tensor", doc="each row's length before the step: an int32 [b] tensor on the device (what a "
            "captured CUDA graph wants), an int32 CPU tensor (checked, then copied over) or an int",
            positional=True, role="written", written_with="advance_lens", dtypes=("int32",)),
        Arg("kv_layout", "str", "bhsd", "the caches' layout: [b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd)"),
        Arg("kv_start", "IntOrTensor", None, "each row's first valid slot: an int or int32 [b], default 0",
            optional=True, op_names=("kv_start_tensor", "kv_start"), dtypes=("int32",)),
        POSITIONS,
    ) + rotary.args(mrope=False) + QK_NORM + (
        Arg("scale", "float", None, "attention's logit scale, default 1/sqrt(d)", optional=True),
        Arg("softcap", "float", None, "logits become softcap * tanh(logit / softcap)", optional=True),
        Arg("num_splits", "int", None, "split-KV count (default: the tuned rule)", optional=True),
        Arg("advance_lens", "bool", False, "add 1 to kv_lens after the step (on the device for a device tensor: a "
            "graph replays step after step with no host work; in place for a CPU tensor; an int cannot be advanced)"),
        Arg("out", "Tensor", None, "[b, h_q, d] output (allocated when None)", optional=True, role="out",
            suffix="#out", rank=1, dtypes=kv_append_api.HALVES, refuse_grad=True),
        Arg("return_lse", "bool", False, "also return the log-sum-exp, fp32 [b, h_q]", role="flag",
            suffix="!#no_lse", rank=3),
        *CACHE_SCALES, BLOCK_TABLE, SINKS, STREAM),
    (Result("out"), Result("lse", only_with="return_lse")),
    """Append each row's new token to the caches (rotated by RoPE, at slot kv_lens[i]) and attend to keys
[kv_start[i], kv_lens[i] + 1) with the rotated query: the attention output [b, h_q, d] (and its log-sum-exp with
``return_lse``).

The RoPE and QK-norm arguments are cukiln.kv_append's; scale, softcap, num_splits, out and return_lse are
cukiln.decode_attention's. Every argument of both launches is validated before anything is written; lengths on the
device are not read back (a row that does not fit writes nothing and gets NaN, as both ops report it).""")

def plan(call: Call):
    """The plan of a decode step: both ops planned on the step's arguments, the rotated query and the new lengths
    in the step's workspace (stand-ins of their shape while planning), fused into one launch where a kernel serves
    it. What the planners chose kept as ``plan.detail`` (a StepPlan)."""
    import torch

    q, kv_lens = call["q"], call["kv_lens"]
    if isinstance(q, torch.Tensor) and q.ndim != 3:
        raise ValueError(f"q: expected [b, h_q, d] (one new token a row), got shape {list(q.shape)}")
    advance = call["advance_lens"]
    if advance and not isinstance(kv_lens, torch.Tensor):
        raise ValueError("advance_lens: kv_lens is an int, which cannot be advanced in place; give an int32 tensor")
    if type(kv_lens) is int and isinstance(q, torch.Tensor):
        kv_lens = torch.full((q.shape[0],), kv_lens, dtype=torch.int32)  # a host value, checked as a CPU tensor's
        call.substitute("kv_lens", kv_lens)
    host_lens = kv_lens if isinstance(kv_lens, torch.Tensor) and not kv_lens.is_cuda else None
    if isinstance(q, torch.Tensor):  # the step reads its rows' keys [kv_start, kv_lens + 1), the new one among them
        kv_append_api.host_pages(call, q.device, torch, 1, reads=True)
    hosts = kv_append_api.host_lengths(call, q.device, torch) if isinstance(q, torch.Tensor) else {}
    lens = call["kv_lens"]
    q_rot, lens_after = torch.empty_like(q), torch.empty_like(lens)  # stand-ins for the workspace's, to plan with
    rotated, after_info = call.info_of("q_rot", q_rot, like="q"), call.info_of("lens_after", lens_after, like="kv_lens")
    arguments = call.arguments()
    wanted = call.form.flags.get("return_lse")
    sinks = call["sinks"] is not None  # the attention into a workspace, then the sinks' merge (decode_api.sink_launches)
    attention = decode_api.plan_attention(call, for_step=True, q=rotated, kv_lens=after_info, return_lse=wanted,
                                          **({"out": None} if sinks else {}))
    append = plan_kv_append(**takes(plan_kv_append, {**arguments, "out": rotated, "kv_lens_out": after_info}),
                            kv_lens_host=hosts.get("kv_lens"), kv_start_host=hosts.get("kv_start"),
                            arch=call.arch(attention.device))
    fuse, bound, attention_fields = fused_kernel(call, append, attention)
    if not fuse:  # two launches: the rotated query and the new lengths in the workspace
        call.add_scratch("q_rot", tuple(q_rot.shape), tuple(q_rot.stride()), q_rot.dtype)
        call.add_scratch("lens_after", tuple(lens_after.shape), (1,), lens_after.dtype)
    call.output("out", lambda: torch.empty(q.shape, dtype=q.dtype, device=q.device))
    if wanted:
        call.output("lse", lambda: torch.empty((attention.batch, attention.heads_q), dtype=torch.float32,
                                               device=q.device))
    names = dict(decode_api.POINTER_FIELDS, q="q_rot", kv_lens="kv_lens" if fuse else "lens_after")
    if not wanted:
        del names["lse"]
    att = (decode_api.sink_launches if sinks else decode_api.attention_launches)(call, attention, names, torch)
    app = []
    if append is not None:
        pointers = [(f, {"out": "q_rot", "kv_lens_out": "lens_after"}.get(name, name), add)
                    for f, name, add in append.pointers]
        app = [call.launch(call.bind(append.device, append.module, append.symbol, append.fmt, append.grid,
                                     append.block, append.shared, append.overlap_previous), append.field_names,
                           append.values, pointers)]
    if fuse:
        launches = [fused(bound, att[0], app[0], attention_fields)] + att[1:]
    else:
        launches = app + att
    after = _advance(call, fuse, host_lens) if advance else None
    result = call.plan(attention.device, launches, after=after,
                       overlaps=call.overlaps(["k_cache", "v_cache", "out"], call.tensor_names()))
    result.detail = StepPlan(append, attention, bound)
    return result


@dataclass(frozen=True)
class StepPlan:
    """What a step's planning chose: the append's plan (None: no row), the attention's, and the fused kernel
    (bound) or None (two launches)."""

    append: object
    attention: object
    fused: object


def _advance(call: Call, fused_launch: bool, host_lens):
    """The step's lengths advanced after its launches: a host tensor in place, a device one by the fused kernel's
    rule (+1) or from the new lengths the append wrote into the workspace."""
    index = call.op.index["kv_lens"]
    lens_at = None if fused_launch else call.scratch_names["lens_after"][0]

    def after(args, workspace, offsets):
        if host_lens is not None:
            host_lens.add_(1)
        elif fused_launch:
            args[index].add_(1)
        else:
            import torch

            start = offsets[lens_at]
            lens = args[index]
            lens.copy_(workspace[start:start + 4 * lens.numel()].view(torch.int32))

    return after


def fused_kernel(call: Call, append, attention) -> tuple[bool, object, int]:
    """(whether the step fuses, its fused kernel bound, the attention's fields in its parameter struct) for a step
    planned as ``append`` and ``attention``: where the
    build has a kernel for them (a ws attention, an append of vectors as wide as the fused rotation's:
    decode_step_family's space) and the override allows it. The override "fused" on a step that no fused kernel
    serves raises, naming why."""
    choice = OVERRIDES["decode_step_launch"]
    if choice not in ("auto", "fused", "separate"):
        raise ValueError(f"CUKILN_DECODE_STEP_LAUNCH: expected fused, separate or auto, got {choice!r}")
    if choice == "separate":
        return False, None, 0
    p = attention
    entry = why = None
    if append is None or p.batch * p.heads_q == 0:
        why = "it has no rows"
    elif call["sinks"] is not None:
        why = "it has attention sinks (folded in by a kernel after the attention)"
    elif p.key[5] != SAME:
        why = f"its caches hold {p.key[5]} (the fused kernels serve caches of q's type)"
    elif p.pipeline != WS or not p.reads_tensor_maps:
        why = (f"its attention takes the {p.pipeline} pipeline over {p.key[6]} caches, not ws over fixed-capacity ones "
               f"(sm_90 on, head dims 64 and 128, 16-byte rows)")
    else:
        dtype, pairing, angles, vec, norm = append.key
        entry = dispatch.DECODE_STEP.get((dtype, p.head_dim, pairing, angles, norm))
        width = dispatch.DECODE_STEP_VEC.get(angles)
        # the fused rotation's accesses need that alignment, and a source whose arithmetic follows the width that
        # width
        if entry is None or vec < width or (angles in dispatch.DECODE_STEP_SAME_WIDTH and vec != width):
            entry, why = None, (f"its append rotates {vec} elements at a time, where the fused kernel for {angles} "
                                f"angles takes {width}" + ("" if angles in dispatch.DECODE_STEP_SAME_WIDTH else
                                                          " or more"))
    if entry is None:
        if choice == "fused":
            raise ValueError(f"decode_step_launch=fused: this step has no fused kernel: {why}")
        return False, None, 0
    module, symbol, layout = entry
    names, fmt = dispatch.DECODE_STEP_PARAMS[layout]
    launch = p.attention
    # the step's struct holds the attention kernel's leading fields (all but the query tokens', which come last)
    kept = [n.removeprefix("attention.") for n in names if n.startswith("attention.")]
    assert list(launch.field_names[:len(kept)]) == kept, "a fused step's attention fields lead the decode kernel's"
    return True, call.bind(p.device, module, symbol, fmt, launch.grid, launch.block, launch.shared,
                           launch.overlap_previous, launch.cluster), len(kept)


RUNTIME = OpRuntime(SCHEMA, plan, torch_module="decode_step_torch")
decode_step, planned, arguments, plan_call = bind(RUNTIME)  # plan_call: the step's StepPlan
