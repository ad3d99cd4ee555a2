"""`cukiln verify`'s check of a decode variant (attention kernels with every split mode, combine kernels through a
split launch), and the inputs and comparisons the GPU tests build on. Inputs are fresh random draws and outputs
are NaN-poisoned before each launch."""

from __future__ import annotations

from cukiln.codegen.decode_variants import Pipeline
from cukiln.generated import dispatch

from ..verify import compare, new_generator, torch_dtype

# fp32 logits carry a relative error of about d x 2**-24, which exp turns into an absolute error of the weights:
# 2**-16 x max|ref| on top of 2 ulp (still 128x below a bf16 ulp at the largest value).
DECODE_FP32_UNITS = 64
# Element offset of a cache view inside its buffer that gives each vector width (1: rows off 16-byte boundaries).
DECODE_OFFSET_FOR_VEC = {16: 0, 8: 0, 1: 1}


def random_e4m3(n: int, gen):
    """``n`` FP8 (e4m3) values drawn uniformly over every finite code (the format's whole range: subnormals, zeros of
    both signs, up to 448), as a float8_e4m3fn tensor on the GPU."""
    import torch

    codes = torch.randint(0, 254, (n,), generator=gen, device="cuda", dtype=torch.int32)
    codes += (codes >= 0x7F).int()  # skip 0x7f; 0xff is past the draw: the two NaN codes
    return codes.to(torch.uint8).view(torch.float8_e4m3fn)


def fp8_scales(h_kv: int) -> dict:
    """Scales for a check over random_e4m3 caches: a key scale per KV head (keeping the logits of keys up to 448 in a
    range where the softmax is not one-hot) and one value scale as a 0-d tensor."""
    import torch

    return {"k_scale": torch.tensor([2.0 ** -(6 + i % 3) for i in range(h_kv)], device="cuda"),
            "v_scale": torch.tensor(0.5, device="cuda")}



def decode_cache_view(b, h_kv, T, d, dtype, gen, *, layout="bhsd", capacity=None, offset=0, strided_d=False):
    """A [b, h_kv, T, d] (or bshd) slice of a larger random buffer of ``capacity`` positions, starting
    ``offset`` elements into its storage; with ``strided_d`` every other element of a 2d-wide last axis."""
    import torch

    capacity = capacity or T + 5
    width = 2 * d if strided_d else d
    dims = (b, h_kv, capacity, width) if layout == "bhsd" else (b, capacity, h_kv, width)
    n = b * h_kv * capacity * width
    if dtype == torch.float8_e4m3fn:
        storage = random_e4m3(n + offset, gen)
    else:
        storage = torch.randn(n + offset, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    full = storage[offset:].view(dims)
    view = full[:, :, :T] if layout == "bhsd" else full[:, :T]
    return view[..., ::2] if strided_d else view


def paged_copy(caches, page_size: int, *, layout: str = "bhsd", pool_layout: str | None = None, gen=None,
               spare: int = 3, width: int | None = None, shuffled: bool = True):
    """Paged pools holding the keys of fixed-capacity caches (each [b, h_kv, T, d] (bhsd) or [b, T, h_kv, d] (bshd):
    ``layout``): (pools, block_table). Row i's pages lie in a shuffled order over the pool (a table that is not the
    identity; ``shuffled=False``: row after row, in order), which has ``spare`` pages more than the rows use (random
    contents, as a pool's unused pages hold, and so do the last pages' slots past T); pools
    in ``pool_layout`` (default ``layout``; bhsd: [pages, h_kv, page_size, d], HND; bshd: [pages, page_size, h_kv,
    d], NHD), a contiguous int32 table of ``width`` columns (default: the pages a row of T keys takes; columns past
    those point at page 0)."""
    import torch

    fixed = [c if layout == "bhsd" else c.transpose(1, 2) for c in caches]
    b, h_kv, T, d = fixed[0].shape
    per_row = -(-T // page_size)
    width = width or per_row
    total = b * per_row + spare
    order = (torch.randperm(total, generator=gen, device=gen.device if gen is not None else "cpu") if shuffled
             else torch.arange(total)).to(fixed[0].device)
    table = torch.zeros(b, width, dtype=torch.int32, device=fixed[0].device)
    table[:, :per_row] = order[:b * per_row].reshape(b, per_row).int()
    pools = []
    for c in fixed:
        fp8 = c.dtype == torch.float8_e4m3fn  # moved as bytes: not every torch indexes FP8 tensors
        drawn = torch.float32 if fp8 else c.dtype  # (drawn in the cache's own type where it can: a pool may be large)
        if spare or per_row * page_size != T:
            pool = torch.randn(total, h_kv, page_size, d, generator=gen, device=c.device, dtype=drawn).to(c.dtype)
        else:  # every slot is a key's: nothing to draw
            pool = torch.empty(total, h_kv, page_size, d, device=c.device, dtype=c.dtype)
        raw, keys = (pool.view(torch.uint8), c.view(torch.uint8)) if fp8 else (pool, c)
        tail = raw[:b, :, :per_row * page_size - T].reshape(b, h_kv, -1, d)  # the last pages' unused slots
        rows = torch.cat([keys, tail], dim=2).reshape(b, h_kv, per_row, page_size, d).transpose(1, 2)
        raw[table[:, :per_row].long().flatten()] = rows.reshape(b * per_row, h_kv, page_size, d)
        pools.append(pool if (pool_layout or layout) == "bhsd" else pool.transpose(1, 2).contiguous())
    return pools, table


def check_lse(lse, ref_lse, atol: float = 0.0) -> str | None:
    """None when the fp32 log-sum-exp matches the reference (-inf rows exactly, others to 1e-5 relative, or ``atol``:
    the fp32 logits' own error where they are far larger than the log-sum-exp)."""
    import torch

    if not torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse)):
        return "log-sum-exp: rows without keys must be -inf, and only those"
    finite = torch.isfinite(ref_lse)
    err = (lse.double() - ref_lse)[finite].abs()
    bound = (1e-5 * ref_lse[finite].abs().clamp_min(1.0)).clamp_min(atol)
    return None if (err <= bound).all() else f"log-sum-exp error {err.max().item():.3g}"


def run_decode_and_compare(q, k, v, kv_lens, lse_atol: float = 0.0, **kwargs) -> tuple[str | None, object, object]:
    """decode_attention into a NaN-poisoned out, compared with the reference: (problem, out, lse; check_lse's
    ``lse_atol``)."""
    import torch

    import cukiln

    out = torch.full_like(q, float("nan"))
    got, lse = cukiln.decode_attention(q, k, v, kv_lens, out=out, return_lse=True, **kwargs)
    if got is not out:
        return "out= was not the tensor returned", out, lse
    kwargs.pop("num_splits", None)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, kv_lens, return_lse=True, **kwargs)
    problem = compare(out.reshape(ref.shape), ref, fp32_units=DECODE_FP32_UNITS) or check_lse(lse, ref_lse, lse_atol)
    return problem, out, lse


# The page sizes a paged variant is checked with, one per split count (page 1: a lookup per key; 128: tiles within a
# page; 16 between), in HND, NHD and HND pools.
CHECKED_PAGE_SIZES = (1, 16, 128)
# The query groups a variant is checked with: a block's tile form follows its group at run time, 8 heads or fewer
# with keys as the mma's rows (from sm_90 on), more with heads as rows (12: one block of 12 heads). The ws kernels
# over FP8 caches serve the former only (the planner takes narrow for the latter).
CHECKED_GROUPS = (4, 12)


def check_decode_variant(axes: dict, name: str, splits: tuple[int, ...] = (1, 3, 20)) -> str | None:
    """Force the decode variant with these axes (random lengths per row, left padding) once per query group of
    CHECKED_GROUPS and split count: 1 (one pass, the output written directly), else split-KV: merged in a cluster
    (sm_90 on, at most MAX_CLUSTER_SPLITS splits) or as partial results merged by the combine kernel."""
    import torch

    from cukiln.decode_api import plan_call

    gen = new_generator()
    dtype, d = torch_dtype(axes["dtype"]), axes["head_dim"]
    b, h_kv, T = 3, 2, 300
    fp8 = axes.get("cache", "same") == "e4m3"
    scales = fp8_scales(h_kv) if fp8 else {}
    k, v = (decode_cache_view(b, h_kv, T, d, torch.float8_e4m3fn if fp8 else dtype, gen,
                              offset=DECODE_OFFSET_FOR_VEC[axes["vec"]], strided_d=axes["strides"] == 4)
            for _ in range(2))
    lens = torch.tensor([T, 1, 177], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 0, 40], dtype=torch.int32, device="cuda")
    fp8_ws = fp8 and Pipeline(axes.get("pipeline", Pipeline.NARROW.value)).warp_specialized
    queries = {group: torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(dtype)
               for group in CHECKED_GROUPS if not fp8_ws or group <= dispatch.DECODE_FP8_WS_MAX_GROUP}
    paged = axes.get("form", "fixed") == "paged"
    # paged: the same keys in pools of pages in shuffled order, a page size per split count
    pools = {n: (paged_copy((k, v), size, pool_layout=layout, gen=gen), layout)
             for n, size, layout in zip(splits, CHECKED_PAGE_SIZES, ("bhsd", "bshd", "bhsd"))} if paged else {}
    with forced_decode_pipeline(axes.get("pipeline", Pipeline.NARROW.value)):
        for group, q in queries.items():
            for num_splits in splits:
                kwargs = dict(kv_start=start, num_splits=num_splits, **scales)
                if paged:
                    ((k, v), table), layout = pools[num_splits]
                    kwargs.update(block_table=table, kv_layout=layout)
                plan = plan_call(q, k, v, lens, **kwargs)
                if plan.attention.symbol != name:
                    return f"inputs selected {plan.attention.symbol}, not the variant under test"
                combine = plan.combine.symbol if plan.combine is not None else None
                merged_by_kernel = num_splits > 1 and plan.attention.cluster == 1
                if combine != (f"decode_combine_{axes['dtype']}_d{d}" if merged_by_kernel else None):
                    return (f"{num_splits} splits (clusters of {plan.attention.cluster}) paired with combine kernel "
                            f"{combine}")
                problem = run_decode_and_compare(q, k, v, lens, **kwargs)[0]
                if problem is not None:
                    return f"GQA {group}, {num_splits} splits: {problem}"
                # several query tokens a row, ragged counts: 3 a row (FP8 over ws: as many as its blocks' 8 rows hold)
                n = min(3, dispatch.DECODE_FP8_WS_MAX_GROUP // group) if fp8_ws else 3
                if n > 1:
                    tokens = torch.randn(b, n, q.shape[1], d, generator=gen, device="cuda").to(dtype)
                    counts = torch.tensor([n, 1, n - 1], dtype=torch.int32, device="cuda")
                    problem = run_decode_and_compare(tokens, k, v, lens, q_lens=counts, **kwargs)[0]
                    if problem is not None:
                        return f"GQA {group}, {num_splits} splits, {n} query tokens a row: {problem}"
        return _check_batch_invariant(axes, name, queries[CHECKED_GROUPS[0]], gen, k.dtype, scales, paged)


def _check_batch_invariant(axes: dict, name: str, q, gen, cache_dtype, scales: dict, paged: bool) -> str | None:
    """The variant in batch-invariant mode over a cache long enough that its rows split by their own key counts
    (the rule's most, one and two splits here), merged by the combine kernel's ordered path (more splits than a
    cluster holds); ``paged``: the same keys in pools of 16-key pages."""
    import torch

    from cukiln.decode_api import plan_call
    from cukiln.decode_plan import INVARIANT_SPLITS, invariant_splits

    b, h_kv, d = q.shape[0], 2, axes["head_dim"]
    T = INVARIANT_SPLITS[-2][0] + 108
    k, v = (decode_cache_view(b, h_kv, T, d, cache_dtype, gen, offset=DECODE_OFFSET_FOR_VEC[axes["vec"]],
                              strided_d=axes["strides"] == 4) for _ in range(2))
    lens = torch.tensor([T, 1, INVARIANT_SPLITS[0][0] + 500], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 0, 40], dtype=torch.int32, device="cuda")
    if paged:
        (k, v), table = paged_copy((k, v), 16, gen=gen)
        scales = {**scales, "block_table": table}
    plan = plan_call(q, k, v, lens, kv_start=start, batch_invariant=True, **scales)
    if plan.attention.symbol != name or plan.num_splits != invariant_splits(T) or plan.combine is None:
        return (f"batch-invariant inputs planned {plan.attention.symbol} with {plan.num_splits} splits and combine "
                f"{plan.combine}, not {name}, {invariant_splits(T)} splits merged by the combine kernel")
    problem = run_decode_and_compare(q, k, v, lens, kv_start=start, batch_invariant=True, **scales)[0]
    return None if problem is None else f"batch-invariant, {plan.num_splits} splits: {problem}"


def require_tensor_maps() -> None:
    """NotOnThisGPU unless this GPU reads through TMA tensor maps (the ws pipelines' kernels)."""
    import torch

    from cukiln.core.archs import tensor_maps

    from ..verify import NotOnThisGPU

    major, minor = torch.cuda.get_device_capability()
    if not tensor_maps(f"sm_{major}{minor}"):
        raise NotOnThisGPU(f"the ws pipelines need sm_90 or newer (this GPU: sm_{major}{minor})")


def forced_decode_pipeline(pipeline: str):
    """A block whose decode calls run the K/V ``pipeline``, whatever the table says (cukiln.overrides)."""
    from cukiln.overrides import forced

    return forced("decode_pipeline", pipeline)


def check_merge_variant(dtype_name: str, name: str) -> str | None:
    """merge_attention of the variant's type: 5 parts of 3 rows x 6 heads, head dim 80, read through strided views
    (parts and heads swapped in memory), one row's parts all empty, one head's with a part empty, without and with
    attention sinks; out NaN-poisoned, compared with the float64 reference, lse too."""
    import torch

    import cukiln
    from cukiln.merge_api import plan_call

    gen = new_generator()
    dtype = torch_dtype(dtype_name)
    outs = torch.randn(6, 3, 5, 80, generator=gen, device="cuda").to(dtype).permute(2, 1, 0, 3)  # [k, b, h, d]
    lses = (torch.randn(6, 3, 5, generator=gen, device="cuda") * 4).permute(2, 1, 0)
    lses[:, 1] = float("-inf")  # row 1: no key in any part
    lses[2, 0, 4] = float("-inf")  # row 0, head 4: part 2 empty
    if plan_call(outs, lses).launch.symbol != name:
        return "inputs selected another merge kernel"
    sinks = torch.randn(6, generator=gen, device="cuda") * 8  # attention sinks: one more part of output zero each
    for extra in ({}, {"sinks": sinks}):
        out = torch.full(outs.shape[1:], float("nan"), device="cuda", dtype=dtype)
        got, lse = cukiln.merge_attention(outs, lses, out=out, return_lse=True, **extra)
        ref, ref_lse = cukiln.reference.merge_attention(outs, lses, return_lse=True, **extra)
        problem = compare(got, ref) or check_lse(lse, ref_lse)
        if problem is not None:
            return ("with sinks: " if extra else "") + problem
    return None


def check_variant(entry: dict) -> str | None:
    """The check of one manifest entry; a combine kernel is checked through a split launch that uses it."""
    axes = entry["axes"]
    if entry["op"] == "decode_merge":
        return check_merge_variant(axes["dtype"], entry["name"])
    if entry["op"] == "decode":
        if Pipeline(axes.get("pipeline", Pipeline.NARROW.value)).warp_specialized:
            require_tensor_maps()
        return check_decode_variant(axes, entry["name"])
    from cukiln.decode_plan import MAX_CLUSTER_SPLITS

    # more splits than a cluster holds: merged by the combine kernel on every GPU
    attention = {**axes, "strides": 3, "vec": 8}
    return check_decode_variant(attention, f"decode_{axes['dtype']}_d{axes['head_dim']}_s3_v8",
                                splits=(MAX_CLUSTER_SPLITS + 4,))
