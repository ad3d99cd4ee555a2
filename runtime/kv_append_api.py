"""cukiln.kv_append: a decode (or chunked-prefill) step's new tokens rotated and appended to fixed-capacity KV caches in
one launch. Its schema (the one declaration of its arguments), its planner (kv_append_plan.plan_kv_append on the
call's TensorInfos) and its public function, built from the schema (runtime/binder.py).
"""

from __future__ import annotations

from . import rotary
from .calls import Call, OpRuntime, bind
from .kv_append_plan import plan_kv_append
from .schema import Arg, OpSchema, Result
from .tensors import CACHES, FLOATS, HALVES, INTS

# The lengths a call gives, as kv_append and decode_step take them
LENGTH_ARGS = (
    Arg("kv_lens", "IntOrTensor", doc="each row's length before the append: an int, or an int32 [b] tensor (on q's "
        "device; a CPU tensor is checked and copied over)", positional=True, per_call=True,
        op_names=("kv_lens_tensor", "kv_len"), dtypes=("int32",)),
    Arg("kv_layout", "str", "bhsd", "the caches' layout: [b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd)"),
    Arg("kv_start", "IntOrTensor", None, "each row's first valid slot (left padding, a sliding window): an int or "
        "int32 [b], default 0", optional=True, per_call=True, op_names=("kv_start_tensor", "kv_start"),
        dtypes=("int32",)),
)
# An FP8 cache's scales, as decode_attention, kv_append and decode_step take them
CACHE_SCALES = tuple(
    Arg(f"{c}_scale", "FloatOrTensor", None, f"an FP8 (float8_e4m3fn) {what} cache's scale: it holds each {what} / "
        f"{c}_scale, saturated to the format's range; a positive float, or an fp32 tensor on q's device, 0-d or [h_kv] "
        f"(one per KV head); default 1; refused for caches of q's dtype", optional=True,
        op_names=(f"{c}_scale_tensor", f"{c}_scale"), int_optional=True, dtypes=("fp32",), refuse_grad=True)
    for c, what in (("k", "key"), ("v", "value")))
# Paged caches, as decode_attention, kv_append and decode_step take them
BLOCK_TABLE = Arg(
    "block_table", "Tensor", None, "paged caches (as serving engines keep them): int32 [b, max_pages] on q's device "
    "(a CPU one is checked, then copied over), "
    "row i's pages in order, key t of row i at slot t % page_size of page block_table[i, t // page_size]; k_cache and "
    "v_cache are then pools of pages, [pages, h_kv, page_size, d] (bhsd: HND) or [pages, page_size, h_kv, d] (bshd: "
    "NHD), any strides on the pool axes (the two halves of one [pages, 2, ...] tensor too), a contiguous head dim, "
    "16-byte aligned rows, a power-of-two page size; a row holds up to max_pages x page_size keys; a page index "
    "outside the pool that a row's keys fall in makes its row NaN (on the device) or is refused (on the CPU)",
    optional=True, dtypes=("int32",), refuse_grad=True)
# gpt-oss's attention sinks, as decode_attention, decode_step and merge_attention take them
SINKS = Arg("sinks", "Tensor", None, "attention sinks (gpt-oss): fp32 [h_q] on q's device, any stride, each query "
            "head's logit that joins its softmax's denominator with no value (out = sum of exp(l_i) v_i / (sum of "
            "exp(l_i) + exp(sink)); the lse includes it; a row without keys gives zeros and lse = sink)",
            optional=True, dtypes=("fp32",), refuse_grad=True)
SLOT_MAPPING = Arg(
    "slot_mapping", "Tensor", None, "paged caches written by flat slot (vLLM's reshape_and_cache contract): int64 "
    "[b * n] (or [b, n]) on q's device, new token j of row i at slot_mapping[i * n + j] = page x page_size + slot of "
    "the pools (k_cache, v_cache as with block_table); negative: not stored (padding); not with block_table",
    optional=True, dtypes=("int64",), refuse_grad=True)
NEW_TOKENS = (
    Arg("q", "Tensor", doc="[b, n, h_q, d] (n new tokens a row: 1 for decode, more for chunked prefill or drafts) or "
        "[b, h_q, d], fp16 or bf16; every tensor's last dim contiguous, its other strides free (q, k and v may be "
        "slices of one fused projection)", positional=True, dtypes=HALVES, refuse_grad=True),
    Arg("k_new", "Tensor", doc="[b, n, h_kv, d] (or [b, h_kv, d]) of q's dtype: the new tokens' keys", positional=True,
        dtypes=HALVES, refuse_grad=True),
    Arg("v_new", "Tensor", doc="the new tokens' values, k_new's shape", positional=True, dtypes=HALVES,
        refuse_grad=True),
    Arg("k_cache", "Tensor", doc="[b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd) of q's dtype or FP8 "
        "(float8_e4m3fn, written from sm_89 on: see k_scale), any strides (a slice of a larger buffer): new token j of "
        "row i goes to slot kv_lens[i] + j", positional=True, role="written", dtypes=CACHES),
    Arg("v_cache", "Tensor", doc="the value cache, k_cache's shape and dtype", positional=True, role="written",
        dtypes=CACHES),
)
QK_NORM = (
    Arg("q_norm_weight", "Tensor", None, "QK-norm (Qwen3, Gemma 3): [d], fp32 or q's dtype, contiguous: each head of "
        "q becomes x * rsqrt(mean(x^2 over the head) + norm_eps) * weight, in fp32, before the rotation (Gemma's "
        "(1 + weight) is passed as such)", optional=True, dtypes=FLOATS),
    Arg("k_norm_weight", "Tensor", None, "the same for k's heads (either weight may be given alone)", optional=True,
        dtypes=FLOATS),
    Arg("norm_eps", "float", 1e-6, "inside the QK-norm's root"),
)
POSITIONS = Arg("positions", "Tensor", None, "each new token's RoPE position, [b, n] (or [b] for n = 1) int32/int64; "
                "default: its slot minus kv_start", optional=True, dtypes=INTS)
STREAM = Arg("stream", "Stream", None, "run on this stream (a torch, CuPy or JAX stream or handle; default: torch's "
             "current one)", optional=True, role="stream")
RENAMED_SCALE = Arg("scale", "float", None, "older spelling of rope_scale", optional=True, role="renamed",
                    renames="rope_scale")

SCHEMA = OpSchema(
    "kv_append",
    NEW_TOKENS + LENGTH_ARGS + (
        POSITIONS,
        Arg("kv_lens_out", "Tensor", None, "an int32 [b] tensor of its own that receives each row's length after the "
            "append, kv_lens + n (what decode_attention reads next)", optional=True, role="out", suffix="#lens_out",
            rank=2, dtypes=("int32",)),
    ) + rotary.args(mrope=False) + QK_NORM + (
        Arg("inplace", "bool", False, "rotate q itself", role="flag", suffix="#inplace", rank=0),
        Arg("out", "Tensor", None, "where the rotated query goes (allocated like q when None)", optional=True,
            role="out", suffix="#out", rank=1, dtypes=HALVES, refuse_grad=True, with_inplace=False),
        *CACHE_SCALES, BLOCK_TABLE, SLOT_MAPPING, STREAM, RENAMED_SCALE),
    (Result("out", in_place_of="q"),),
    """Rotate each row's new query and key tokens by RoPE and append the rotated keys and the values to the caches at
the row's current length, in one launch. Returns the rotated query.

The features outside the rotated span pass through to q's output and to the key cache; k_new is never written.
Lengths on the device are never read back: a row whose new slots would run past the capacity (or with a negative
length, or a kv_start beyond its length) writes nothing to the caches and gets NaN rotated features in its query
output, as decode_attention reports bad lengths with NaN. Host-known lengths are checked, and a bad one raises
before anything is written. Runs on the current torch stream without synchronizing; CUDA-graph capturable with
device lengths. Not differentiable.""")


def host_pages(call: Call, device, torch, new_tokens: int, *, reads: bool) -> None:
    """A block table or slot mapping given on the CPU: every page the call touches (host_used: the keys it reads, or
    the slots it writes, of ``new_tokens`` new tokens a row) checked against the pool (ValueError naming the argument:
    nothing is written), then copied to ``device`` for the call (whose plan then serves it alone). Nothing to do for
    tables on the device."""
    table, slots = call["block_table"], call["slot_mapping"] if "slot_mapping" in call.op.index else None
    on_host = [isinstance(t, torch.Tensor) and not t.is_cuda and not t.is_floating_point() for t in (table, slots)]
    pool, layout = call["k_cache"], call["kv_layout"]
    if not any(on_host) or getattr(pool, "ndim", 0) != 4 or layout not in ("bhsd", "bshd"):
        return  # (a pool of another rank or layout: the planner explains)
    pages, page_size = pool.shape[0], pool.shape[2 if layout == "bhsd" else 1]
    if on_host[0] and table.ndim == 2:
        used = host_used(call["kv_lens"], call["kv_start"], new_tokens, torch, reads=reads)
        entries = table.to(torch.int64)
        columns = torch.arange(entries.shape[1])
        if used is None or used.shape[0] not in (1, entries.shape[0]):  # (a table of other rows: the planner says so)
            touched = torch.ones_like(entries, dtype=torch.bool)
        else:  # (an int length stands for every row's; a row of no keys touches no page)
            first, end = used.expand(entries.shape[0], 2).split(1, dim=1)
            touched = (columns >= first // page_size) & (columns < -(-end // page_size)) & (end > first)
        bad = (touched & ((entries < 0) | (entries >= pages))).nonzero()
        if len(bad):
            i, j = bad[0].tolist()
            raise ValueError(f"block_table: row {i}'s page {j} is {int(entries[i, j])}, outside the pool's {pages} pages")
        call.substitute("block_table", table.to(device))
    if on_host[1]:
        flat = slots.to(torch.int64).flatten()
        bad = ((flat < -1) | (flat >= pages * page_size)).nonzero()
        if len(bad):
            t = int(bad[0])
            raise ValueError(f"slot_mapping: new token {t}'s slot {int(flat[t])} is outside the pool's {pages} x "
                             f"{page_size} slots (-1: not stored)")
        call.substitute("slot_mapping", slots.to(device))


def host_used(lens, start, new_tokens: int, torch, *, reads: bool):
    """Each row's keys [first, end) a paged call touches, int64 [b, 2], from host lengths (an int or a CPU tensor;
    None when either is on the device): a decode's reads [kv_start, kv_lens + new_tokens), an append's writes
    [kv_lens, kv_lens + new_tokens)."""
    given = (lens, start) if reads else (lens,)  # an append's writes do not depend on kv_start
    on_host = [torch.as_tensor(0 if x is None else x).to(torch.int64).reshape(-1) for x in given
               if not (isinstance(x, torch.Tensor) and x.is_cuda)]
    if len(on_host) < len(given):
        return None
    lens, start = torch.broadcast_tensors(*on_host) if reads else (on_host[0], None)
    return torch.stack((start if reads else lens, lens + new_tokens), dim=1)


def host_lengths(call: Call, device, torch) -> dict:
    """The values of kv_lens / kv_start given as CPU tensors, by name: checked int32, then copied to ``device`` for
    the call (whose plan then serves it alone: the values are checked per call)."""
    found = {}
    for name in ("kv_lens", "kv_start"):
        value = call[name]
        if isinstance(value, torch.Tensor) and not value.is_cuda:
            if value.dtype != torch.int32 and not (call.validating and value.dtype == torch.int64):
                raise TypeError(f"{name}: expected int32, got {str(value.dtype).replace('torch.', '')}")
            found[name] = tuple(value.tolist())
            call.substitute(name, value.to(device))
    return found


def plan(call: Call, *, lens_out_in_scratch: bool = False):
    """The plan of a kv_append call (``lens_out_in_scratch``: a decode step's, whose new lengths go to its
    workspace, named "kv_lens_out"). The planner's product is kept as ``plan.detail``."""
    torch = _torch()
    q = call["q"]
    if isinstance(q, torch.Tensor) and call["k_cache"] is not None:
        host_pages(call, q.device, torch, q.shape[1] if q.ndim == 4 else 1, reads=False)
    hosts = host_lengths(call, q.device, torch) if isinstance(q, torch.Tensor) else {}
    if call.form.inplace:
        if call.given.get("out") is not None and call.given["out"] is not q:
            raise ValueError("out: inplace=True writes q itself; got a different out tensor")
        call.alias("out", "q")
    elif isinstance(q, torch.Tensor):
        call.output("out", lambda: torch.empty_like(q))
    p = plan_kv_append(**call.arguments(), kv_lens_host=hosts.get("kv_lens"), kv_start_host=hosts.get("kv_start"),
                       arch=call.arch(call.info("q").device))
    launches, bounds, ordered = [], [], []
    if p is not None:
        integers, bounds, ordered = int_lengths(call, p)
        launches.append(call.launch(call.bind(p.device, p.module, p.symbol, p.fmt, p.grid, p.block, p.shared,
                                              p.overlap_previous), p.field_names, p.values, p.pointers, integers))
    written = ["k_cache", "v_cache", "out"] + ([] if lens_out_in_scratch else ["kv_lens_out"])
    result = call.plan(call.info("q").device, launches, bounds=bounds, ordered=ordered,
                       overlaps=call.overlaps(written, call.tensor_names()))
    result.detail = p
    return result


def int_lengths(call: Call, p) -> tuple[list, list, list]:
    """A plan's int lengths, refilled per call: (integer slots, bounds, ordered pairs). Where both lengths are ints
    the planner checked 0 <= kv_start <= kv_len and kv_len + n <= T, and without positions that every position
    (slot - kv_start) lies in the angle table: bounded here by kv_len + n <= its rows, which holds whenever those
    checks pass with kv_start = 0 (a call past it with a larger kv_start is planned afresh, which serves it)."""
    lens, start = call["kv_lens"], call["kv_start"]
    lens_int, start_int = type(lens) is int, start is None or type(start) is int
    integers = [(f, name) for f, name, given in (("kv_len_value", "kv_lens", lens_int),
                                                 ("kv_start_value", "kv_start", start_int)) if given]
    if not (lens_int and start_int):
        return integers, [], []  # a length on the device: the kernel reports a bad row with NaN
    values = dict(zip(p.field_names, p.values))
    top = values["capacity"] - values["new_tokens"]
    table = next((call[n] for n in ("freqs", "cos", "sin", "cos_sin_cache") if call[n] is not None), None)
    if call["positions"] is None and table is not None:
        top = min(top, table.shape[0] - values["new_tokens"])
    length, first = SCHEMA.int_index("kv_lens"), SCHEMA.int_index("kv_start")
    return integers, [(length, 0, top), (first, 0, 2 ** 62)], [(first, length)]


def _torch():
    import torch

    return torch


RUNTIME = OpRuntime(SCHEMA, plan, torch_module="kv_append_torch")
kv_append, planned, arguments, plan_call = bind(RUNTIME)  # plan_call: the planner's KvAppendPlan
