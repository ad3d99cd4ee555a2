"""The fused decode step's verify check: the inputs that select a variant (the GPU tests build on them) and its
comparison with the two-launch step and the float64 references."""

from __future__ import annotations

from ..decode.checks import CHECKED_GROUPS
from ..kv_append.checks import check_caches
from ..rope.checks import rope_angle_args, with_each_source
from ..verify import compare, new_generator, torch_dtype

# rows, query heads, KV heads, cache slots; the rotated span of each head: [d / 4, d / 4 + d / 2)
ROWS, HEADS_Q, HEADS_KV, SLOTS = 4, 8, 2, 200
# The query heads a variant is checked with: the attention's tile form follows the query group at run time, so each
# of decode's CHECKED_GROUPS (keys as the mma's rows, heads as rows).
CHECKED_HEADS_Q = tuple(group * HEADS_KV for group in CHECKED_GROUPS)


def step_case(axes: dict, gen, dev, heads_q: int = HEADS_Q) -> tuple[tuple, dict]:
    """Inputs that select the variant with ``axes``: (q, k_new, v_new, k_cache, v_cache, kv_lens) and the keywords:
    caches that are slices of larger buffers holding random values, device lengths with left padding, one row whose
    new token lands in the last slot and one whose does not fit (NaN output, nothing written), a partial rotary span
    inside each head, the angle arguments of the variant's source with an mscale other than 1, and QK-norm weights
    for a QK-norm variant."""
    import torch

    dtype, d = torch_dtype(axes["dtype"]), axes["head_dim"]
    rd, offset = d // 2, d // 4
    q = torch.randn(ROWS, heads_q, d, generator=gen, device=dev).to(dtype)
    k, v = (torch.randn(ROWS, HEADS_KV, d, generator=gen, device=dev).to(dtype) for _ in range(2))
    k_cache, v_cache = (torch.randn(ROWS, HEADS_KV, SLOTS + 24, d, generator=gen, device=dev).to(dtype)[:, :, :SLOTS]
                        for _ in range(2))
    lens = torch.tensor([0, 77, SLOTS - 1, SLOTS], dtype=torch.int32, device=dev)
    start = torch.tensor([0, 5, 3, 0], dtype=torch.int32, device=dev)
    angles = rope_angle_args(axes["angles"], dtype, SLOTS + 8, rd, gen, dev)
    norm = {}
    if axes.get("qk_norm"):
        norm = {f"{t}_norm_weight": (torch.rand(d, generator=gen, device=dev) + 0.5).to(dtype) for t in "qk"}
        norm["norm_eps"] = 1e-5
    kw = dict(kv_start=start, interleaved=axes["pairing"] == "interleaved", rotary_offset=offset,
              **{**angles, "rotary_dim": rd}, **norm)
    return (q, k, v, k_cache, v_cache, lens), kw


def check_variant(entry: dict) -> str | None:
    """The fused step on inputs that select the variant (with each of CHECKED_HEADS_Q query heads), against the same
    step launched as an append and an attention (the same bits: output and caches) and against the float64
    references: the caches against kv_append's, the output against the attention over the keys the step wrote and
    the query as the append rotates it (the bf16 query that both kinds of step attend with; its own float64 check is
    the append's)."""
    import torch

    from ..decode.checks import require_tensor_maps

    require_tensor_maps()  # the fused kernel is the ws attention's: sm_90 on (verify lists it apart before)
    from cukiln.generated import dispatch

    gen = new_generator()
    # a kernel of any angle source: each source it serves, the query head counts in turn
    for heads_q, source in with_each_source(dispatch.DECODE_STEP, entry, list(CHECKED_HEADS_Q)):
        axes = {**entry["axes"], "angles": source}
        problem = _check_step(entry, *step_case(axes, gen, torch.device("cuda"), heads_q))
        if problem is not None:
            return f"{heads_q} query heads, angles from {source}: {problem}"
    return None


def _check_step(entry: dict, tensors: tuple, kw: dict) -> str | None:
    """check_variant's comparisons on one input set."""
    import torch

    import cukiln
    from cukiln import decode_step_api
    from cukiln.reference import kv_append as reference_kv_append
    from cukiln.overrides import forced

    from ..decode.checks import DECODE_FP32_UNITS

    q, k, v, k_cache, v_cache, lens = tensors
    fused = decode_step_api.plan_call(q, k, v, k_cache, v_cache, lens, **kw).fused
    if fused is None or fused.symbol != entry["name"]:
        return f"inputs selected {None if fused is None else fused.symbol}, not the variant under test"
    caches = k_cache.clone(), v_cache.clone()
    got = cukiln.decode_step(q, k, v, *caches, lens, **kw)
    apart = k_cache.clone(), v_cache.clone()
    with forced("decode_step_launch", "separate"):
        want = cukiln.decode_step(q, k, v, *apart, lens, **kw)
    if not (torch.equal(caches[0], apart[0]) and torch.equal(caches[1], apart[1])):
        return "the caches differ from the two-launch step's"
    if not torch.equal(got.isnan(), want.isnan()) or not torch.equal(got.nan_to_num(), want.nan_to_num()):
        return "the output differs from the two-launch step's"
    append_kw = dict(kw)
    ref_caches = k_cache.clone(), v_cache.clone()
    reference_kv_append(q, k, v, *ref_caches, lens, **append_kw)
    problem = check_caches(caches, ref_caches, (k_cache, v_cache))
    if problem is not None:
        return problem
    fits = (lens < SLOTS).tolist()
    q_rot = cukiln.kv_append(q, k, v, k_cache.clone(), v_cache.clone(), lens, **append_kw)
    ref = cukiln.reference.decode_attention(q_rot, *caches, lens + 1, kv_start=kw["kv_start"])
    rows = [i for i, f in enumerate(fits) if f]
    problem = compare(got[rows], ref[rows], fp32_units=DECODE_FP32_UNITS)
    if problem is not None:
        return f"output: {problem}"
    if not got[[i for i, f in enumerate(fits) if not f]].isnan().all():
        return "the row that does not fit: its output is not all NaN"
    return None
