"""cukiln.decode_attention: one query token per row over a fixed-capacity KV cache or a paged one, read in place. Its schema (the one
declaration of its arguments), its planner (decode_plan.plan_decode on the call's TensorInfos: the attention kernel,
and the combine kernel merging split-KV results where the splits outnumber a cluster) and its public function,
built from the schema (runtime/binder.py).
"""

from __future__ import annotations

from cukiln.generated import dispatch

from .calls import Call, OpRuntime, bind, takes
from .decode_plan import FP8, MAP_FIELDS, PIPELINES, WS, DecodePlan, check_host_lengths, plan_decode, query_tokens
from .driver import tensor_map
from .kv_append_api import BLOCK_TABLE, CACHE_SCALES, LENGTH_ARGS, SINKS, STREAM, host_pages
from .merge_plan import plan_merge
from .overrides import CURRENT as OVERRIDES
from .schema import Arg, OpSchema, Result, changed
from .tensors import CACHES, HALVES, TensorInfo

SCHEMA = OpSchema(
    "decode_attention",
    (Arg("q", "Tensor", doc="[b, h_q, d] (or [b, 1, h_q, d] / [b, h_q, 1, d]), fp16 or bf16, any strides; or [b, n, "
         "h_q, d] (n > 1 query tokens a row: speculative verification, multi-token prediction; token j of row i "
         "attends to keys [kv_start, kv_lens - n_i + j + 1), the caches holding the row's new tokens; rows and tokens "
         "mergeable)", positional=True, dtypes=HALVES, refuse_grad=True),
     Arg("k_cache", "Tensor", doc="[b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd) of q's dtype or FP8 "
         "(float8_e4m3fn: contiguous head dim, 16-byte aligned rows; see k_scale), any strides: typically a slice "
         "[:, :, :T] of a larger preallocated buffer, read in place, never copied; h_q a multiple of h_kv (GQA: query "
         "head i reads KV head i // (h_q / h_kv))", positional=True, dtypes=CACHES, refuse_grad=True),
     Arg("v_cache", "Tensor", doc="the value cache, k_cache's shape and dtype", positional=True, dtypes=CACHES,
         refuse_grad=True))
    + changed(LENGTH_ARGS, kv_lens={"doc": "row i attends to keys [kv_start[i], kv_lens[i]): an int, or an int32 [b] "
                                           "tensor (on q's device; a CPU tensor is checked and copied over)"})
    + (Arg("scale", "float", None, "logit scale, default 1/sqrt(d)", optional=True),
       Arg("softcap", "float", None, "logits become softcap * tanh(logit / softcap)", optional=True),
       Arg("num_splits", "int", None, "split-KV count (default: the tuned rule of the dispatch table for this GPU, "
           "which also picks the K/V pipeline per grid; a count given runs the narrow pipeline)", optional=True),
       Arg("out", "Tensor", None, "q-shaped output (allocated when None)", optional=True, role="out", suffix="#out",
           rank=1, dtypes=HALVES, refuse_grad=True),
       Arg("return_lse", "bool", False, "also return the natural-log log-sum-exp of the scaled logits, fp32 [b, h_q]",
           role="flag", suffix="!#no_lse", rank=3),
       Arg("batch_invariant", "bool", False, "each row's result depends on that row's inputs and lengths alone, the "
           "same bits whatever the batch, the other rows' lengths or the capacity (a row split by its own key count; "
           "far slower than the tuned choice for a lone row of up to 8192 keys); not with num_splits"),
       *CACHE_SCALES, BLOCK_TABLE, SINKS,
       Arg("q_lens", "Tensor", None, "with q [b, n, h_q, d]: each row's query tokens n_i <= n, int32 [b] on q's "
           "device (a CPU tensor is checked and copied over); tokens from n_i on are padding (zeros, lse -inf); "
           "default n", optional=True, dtypes=("int32",), refuse_grad=True),
       STREAM),
    (Result("out"), Result("lse", only_with="return_lse")),
    """Attention of one query token per row over keys [kv_start, kv_lens) of that row's KV cache: the output (and its
log-sum-exp with ``return_lse``).

Every query head of a KV head is served from one read of it (groups of up to 16; larger groups read it once per 16).
A row with no keys gives zeros and log-sum-exp -inf. On-device lengths cannot be checked without a synchronization:
a row whose kv_lens exceeds T, or whose kv_start is negative or beyond its kv_lens, gives NaN (output and lse).
``CUKILN_DECODE_PIPELINE=narrow|deep|wide|ws|ws_deep`` (or ``cukiln.overrides.forced("decode_pipeline", name)``)
forces a K/V pipeline, for checks and measurements.
Runs on the current torch stream without synchronizing (``stream=`` picks another); CUDA-graph capturable. CuPy,
JAX or any ``__dlpack__`` / ``__cuda_array_interface__`` arrays are taken without a copy and the results come back in
q's framework (see cukiln.interop). Not differentiable: with grad mode on, q, k_cache, v_cache or out requiring
grad is refused.""")

# Where each pointer field of the attention and combine kernels' structs comes from: the call's tensor of that name
# (the split results: scratch of that name)
POINTER_FIELDS = {"q": "q", "k": "k_cache", "v": "v_cache", "kv_lens": "kv_lens", "kv_start": "kv_start",
                  "out": "out", "lse": "lse", "partial_out": "partial_out", "partial_lse": "partial_lse",
                  "k_scale": "k_scale", "v_scale": "v_scale", "block_table": "block_table", "q_lens": "q_lens"}


def tensor_maps(plan: DecodePlan, k_ptr: int, v_ptr: int) -> tuple[bytes, bytes]:
    """A ws plan's tensor maps (d, T, h_kv, b) of the K and V caches at these pointers: boxes of one tile's keys x 128
    bytes (64 columns of fp16 / bf16, 128 of an FP8 cache's bytes) in the 128-byte swizzle, as attend_ws loads them,
    the L2 fetching DECODE_WS_L2_PROMOTION bytes a request."""
    f = plan.fields
    element, itemsize = (FP8, 1) if plan.key[5] == FP8 else (plan.key[0], 2)
    dims = (plan.head_dim, f["capacity"], plan.heads_q // f["group"], plan.batch)
    box = (128 // itemsize, dispatch.DECODE_TILE_KEYS[WS], 1, 1)
    return tuple(tensor_map(element, ptr, dims, tuple(f[f"{c}_{s}"] * itemsize for s in ("st", "sh", "sb")), box,
                            l2_promotion=dispatch.DECODE_WS_L2_PROMOTION)
                 for c, ptr in (("k", k_ptr), ("v", v_ptr)))


def launch_values(plan: DecodePlan, *, out: int, lse: int, partial_out: int = 0, partial_lse: int = 0):
    """(attention values, combine values) of ``plan`` with these output and workspace pointers, as a bare launch of
    its kernels needs them: DecodePlan.values, with a ws plan's tensor maps of the plan's own caches."""
    attention, combine = plan.values(out=out, lse=lse, partial_out=partial_out, partial_lse=partial_lse)
    if plan.reads_tensor_maps:
        attention = tensor_maps(plan, plan.fields["k"], plan.fields["v"]) + attention[2:]
    return attention, combine


def host_lengths(call: Call, device, torch) -> None:
    """kv_lens / kv_start given as CPU tensors: checked (dtype and every value), then copied to ``device`` for the
    call (whose plan then serves it alone)."""
    given = {name: call[name] for name in ("kv_lens", "kv_start")}
    counts = call["q_lens"] if "q_lens" in call.op.index else None
    if isinstance(counts, torch.Tensor) and not counts.is_cuda:  # each row's query tokens: within q's
        q = call["q"]
        tokens = q.shape[1] if q.ndim == 4 and q.shape[1] > 1 and q.shape[2] > 1 else 1
        if counts.dtype != torch.int32 and not (call.validating and counts.dtype == torch.int64):
            raise TypeError(f"q_lens: expected an int32 tensor, got {str(counts.dtype).replace('torch.', '')}")
        if any(not 0 <= c <= tokens for c in counts.tolist()):
            raise ValueError(f"q_lens: expected counts in [0, {tokens}] (q's query tokens a row), got {counts.tolist()}")
        call.substitute("q_lens", counts.to(device))
    for name, value in given.items():
        if isinstance(value, torch.Tensor):
            if value.dtype != torch.int32 and not (call.validating and value.dtype == torch.int64):
                raise TypeError(f"{name}: expected an int32 tensor, got {str(value.dtype).replace('torch.', '')}")
            if not value.is_cuda:
                check_host_lengths(name, value.tolist(), given["kv_lens"], call["k_cache"], call["kv_layout"],
                                   call["block_table"])
                call.substitute(name, value.to(device))


def plan_attention(call: Call, *, for_step: bool = False, **given) -> DecodePlan:
    """decode_plan.plan_decode on the call's arguments (``given`` replacing some: a decode step's query and lengths),
    with this GPU's facts and the forced pipeline."""
    arguments = takes(plan_decode, {**call.arguments(), **given})
    device = arguments["q"].device
    resident, active_clusters = call.occupancy(device, 32 * dispatch.DECODE_WARPS)
    return plan_decode(**arguments, sms=call.sms(device), arch=call.arch(device), max_shared=call.max_shared(device),
                       resident=resident, active_clusters=active_clusters, pipeline=forced_pipeline(),
                       for_step=for_step, tuning=call.tuning(device))


def attention_launches(call: Call, p: DecodePlan, names: dict, torch) -> list:
    """The launches of a decode plan: the attention kernel, then the combine where the plan has one (its split
    results' scratch added to the call here). ``names``: the call's tensor of each struct pointer field
    (POINTER_FIELDS' keys)."""
    if p.batch * p.heads_q == 0:
        return []
    if p.combine is not None:
        shape = (p.batch, p.heads_q, p.num_splits)
        call.add_scratch("partial_out", shape + (p.head_dim,), (p.heads_q * p.num_splits * p.head_dim,
                                                                 p.num_splits * p.head_dim, p.head_dim, 1),
                         torch.float32)
        call.add_scratch("partial_lse", shape, (p.heads_q * p.num_splits, p.num_splits, 1), torch.float32)
    attention, combine = p.values(out=0, lse=0)
    pointers = [(f, names[f], 0) for f in POINTER_FIELDS if f in names]
    integers = [(f, n) for f, n in (("kv_len", "kv_lens"), ("kv_start_value", "kv_start"))
                if n in call.op.number_or_tensor and (call[n] is None or type(call[n]) is int)]
    maps = None
    if p.reads_tensor_maps:
        maps = (MAP_FIELDS, (names["k"], names["v"]), lambda pointers: tensor_maps(p, *pointers))
    a = p.attention
    launches = [call.launch(call.bind(p.device, a.module, a.symbol, a.fmt, a.grid, a.block, a.shared,
                                      a.overlap_previous, a.cluster), a.field_names, attention, pointers, integers,
                            maps)]
    if p.combine is not None:
        c = p.combine
        launches.append(call.launch(call.bind(p.device, c.module, c.symbol, c.fmt, c.grid, c.block, c.shared,
                                              c.overlap_previous, c.cluster), c.field_names, combine, pointers))
    return launches


def sink_launches(call: Call, p: DecodePlan, names: dict, torch) -> list:
    """The launches of an attention with sinks: the attention (attention_launches) writing its output and lse into
    the call's workspace, then merge_attention's kernel folding each query head's sink in (one part, and the sink as
    a part of output zero: merge_plan) into the call's out and, where ``names`` has it, lse."""
    b, h, d = p.batch, p.heads_q, p.head_dim
    q = call.info("q")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[q.dtype]
    call.add_scratch("unsunk", (b, h, d), (h * d, d, 1), dtype)
    call.add_scratch("unsunk_lse", (b, h), (h, 1), torch.float32)
    launches = attention_launches(call, p, {**names, "out": "unsunk", "lse": "unsunk_lse"}, torch)
    # the merge planned on stand-ins of the workspace's parts (one: [1, b, h, ...])
    where = call["q"].device  # (the planner's device index stands for it; a reference's is the CPU)
    # (kept alive while planning: a stand-in freed early could share its address with the next, which would overlap)
    stand_ins = [torch.empty((1, b, h, d), dtype=dtype, device=where),
                 torch.empty((1, b, h), dtype=torch.float32, device=where),
                 torch.empty((b, h, d), dtype=dtype, device=where)]
    outs = call.info_of("unsunk", stand_ins[0], like="q")
    lses = call.info_of("unsunk_lse", stand_ins[1])
    out = call.info("out")
    if out is None:  # a reference validating the call allocates no output: a stand-in of the one it would get
        out = call.info_of("out", stand_ins[2], like="q")
    out_rows = TensorInfo(out.ptr, *query_tokens(out, "out")[:2], out.dtype, out.device)
    wanted = "lse" in names
    lse = call.info("lse") if wanted else None
    if lse is not None:  # [b, n, h_q] with several tokens a row: as its query rows
        lse = TensorInfo(lse.ptr, (b, h), (h, 1), lse.dtype, lse.device)
    m = plan_merge(outs, lses, out=out_rows, return_lse=wanted, lse=lse,
                   arch=call.arch(p.device), sinks=call.info("sinks"))
    if m is not None:
        a = m.launch
        pointers = [("outs", "unsunk", 0), ("lses", "unsunk_lse", 0), ("out", names["out"], 0), ("sinks", "sinks", 0)]
        pointers += [("lse", names["lse"], 0)] if wanted else []
        launches.append(call.launch(call.bind(m.device, a.module, a.symbol, a.fmt, a.grid, a.block, a.shared,
                                              a.overlap_previous), a.field_names, m.values, pointers))
    return launches


def plan(call: Call):
    """The plan of a decode_attention call; the planner's DecodePlan kept as ``plan.detail``."""
    import torch

    q = call["q"]
    if call["kv_lens"] is None:
        raise TypeError("kv_lens: expected an int or an int32 tensor [b], got None")
    if isinstance(q, torch.Tensor):
        host_pages(call, q.device, torch, 0, reads=True)
        host_lengths(call, q.device, torch)
    sinks = call["sinks"] is not None
    p = plan_attention(call, out=None) if sinks else plan_attention(call)  # sinks: the attention into a workspace
    call.output("out", lambda: torch.empty(q.shape, dtype=q.dtype, device=q.device))
    if call.form.flags.get("return_lse"):
        rows = (p.batch // p.tokens, p.tokens) if p.tokens > 1 else (p.batch,)  # [b, n, h_q] with several tokens
        call.output("lse", lambda: torch.empty((*rows, p.heads_q), dtype=torch.float32, device=q.device))
    names = {f: n for f, n in POINTER_FIELDS.items() if n != "lse" or call.form.flags.get("return_lse")}
    launches = (sink_launches if sinks else attention_launches)(call, p, names, torch)
    bounds, ordered = length_bounds(call, p.fields["capacity"])
    result = call.plan(p.device, launches, bounds=bounds, ordered=ordered,
                       overlaps=call.overlaps(["out"], ["q", "k_cache", "v_cache", "kv_lens", "kv_start",
                                                        "block_table", "sinks", "q_lens"]))
    result.detail = p
    return result


def length_bounds(call: Call, capacity: int, schema=None) -> tuple[list, list]:
    """The int lengths' checks a call must pass to reuse a plan: 0 <= kv_len <= capacity, 0 <= kv_start (<= kv_len
    when both are ints)."""
    schema = schema or call.schema
    lens_int = type(call["kv_lens"]) is int
    start_int = call["kv_start"] is None or type(call["kv_start"]) is int
    bounds, ordered = [], []
    if lens_int:
        bounds.append((schema.int_index("kv_lens"), 0, capacity))
    if start_int:
        bounds.append((schema.int_index("kv_start"), 0, 2 ** 62))
        if lens_int:
            ordered.append((schema.int_index("kv_start"), schema.int_index("kv_lens")))
    return bounds, ordered


def forced_pipeline() -> str | None:
    """The K/V pipeline forced by the override (cukiln.overrides; "auto": None, the dispatch table's choice)."""
    value = OVERRIDES["decode_pipeline"]
    if value == "auto":
        return None
    if value not in PIPELINES:
        raise ValueError(f"CUKILN_DECODE_PIPELINE: expected one of {PIPELINES} or auto, got {value!r}")
    return value


RUNTIME = OpRuntime(SCHEMA, plan, torch_module="decode_torch")
decode_attention, planned, arguments, plan_call = bind(RUNTIME)  # plan_call: the planner's DecodePlan
