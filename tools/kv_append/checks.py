"""kv_append's verify check: the inputs that select a variant (the GPU tests build on them) and its comparison with
the float64 reference."""

from __future__ import annotations

from ..rope.checks import rope_angle_args, rope_x_for, with_each_source
from ..verify import compare, new_generator, torch_dtype

# rows, new tokens a row, q heads, kv heads, head dim, cache slots; the rotated span [16, 64) of each head
SHAPE = (4, 3, 5, 2, 80, 40)
ROTARY_DIM, ROTARY_OFFSET = 48, 16


def kv_append_case(axes: dict, gen, dev, kv_layout: str = "bhsd", fp8: bool = False) -> dict:
    """Inputs that select the variant with ``axes``: q, k_new, v_new, caches (slices of larger buffers) holding a
    random pattern, device kv_lens with left padding, the last row too long to fit (it must write nothing), the
    angle arguments of the variant's source, and QK-norm weights for a QK-norm variant. ``fp8``: FP8 (e4m3) caches
    of random codes, a key scale per KV head (a tensor) and one value scale (a float)."""
    import torch

    dtype = torch_dtype(axes["dtype"])
    itemsize = torch.finfo(dtype).bits // 8
    b, n, hq, hkv, d, T = SHAPE
    vec = axes["vec"]
    # padded rows whose pointers and strides allow vectors of vec elements and no wider (RoPE's 3-stride inputs)
    q = rope_x_for(3, vec, itemsize, (b, n, hq, d), dtype, gen, dev)
    k = rope_x_for(3, vec, itemsize, (b, n, hkv, d), dtype, gen, dev)
    v = rope_x_for(3, vec, itemsize, (b, n, hkv, d), dtype, gen, dev)
    cache_shape = (b, hkv, T, d) if kv_layout == "bhsd" else (b, T, hkv, d)
    if fp8:
        from ..decode.checks import random_e4m3

        k_cache, v_cache = (random_e4m3(b * hkv * T * d, gen).view(cache_shape) for _ in range(2))
    else:
        k_cache = rope_x_for(3, vec, itemsize, cache_shape, dtype, gen, dev)
        v_cache = rope_x_for(3, vec, itemsize, cache_shape, dtype, gen, dev)
    scales = {"k_scale": torch.tensor([0.02, 0.007], device=dev), "v_scale": 0.011} if fp8 else {}
    lens = torch.tensor([0, 17, T - n, T - n + 1], dtype=torch.int32, device=dev)[:b]  # the last one overflows
    start = torch.tensor([0, 5, 2, 0], dtype=torch.int32, device=dev)[:b]
    angles = rope_angle_args(axes["angles"], dtype, T + 8, ROTARY_DIM, gen, dev)
    norm = {}
    if axes.get("qk_norm"):  # weights in fp32 beside bhsd caches, in q's dtype beside bshd ones
        w_dtype = torch.float32 if kv_layout == "bhsd" else dtype
        norm = {f"{t}_norm_weight": (torch.rand(d, generator=gen, device=dev) + 0.5).to(w_dtype) for t in "qk"}
        norm["norm_eps"] = 1e-5
    return dict(q=q, k_new=k, v_new=v, k_cache=k_cache, v_cache=v_cache, kv_lens=lens, kv_start=start,
                kv_lens_out=torch.full((b,), -7, dtype=torch.int32, device=dev),
                kv_layout=kv_layout, interleaved=axes["pairing"] == "interleaved", rotary_offset=ROTARY_OFFSET,
                **{**angles, "rotary_dim": ROTARY_DIM}, **norm, **scales)


def check_case(case: dict, inplace: bool = False) -> str | None:
    """Run kv_append on ``case`` beside its float64 reference: None when the query output and both caches match
    (the overflowing row: NaN rotated query features, no cache write; every slot not written keeps its bits)."""
    import torch

    import cukiln
    from cukiln.reference import kv_append as reference_kv_append

    q = case["q"]
    ref_caches = case["k_cache"].clone(), case["v_cache"].clone()
    before = case["k_cache"].clone(), case["v_cache"].clone()
    kw = {name: value for name, value in case.items() if name not in ("q", "k_new", "v_new", "k_cache", "v_cache",
                                                                     "kv_lens")}
    ref_q = reference_kv_append(q, case["k_new"], case["v_new"], *ref_caches, case["kv_lens"],
                                **{**kw, "kv_lens_out": None})
    if inplace:
        got = cukiln.kv_append(q, case["k_new"], case["v_new"], case["k_cache"], case["v_cache"], case["kv_lens"],
                               inplace=True, **kw)
        if got is not q:
            return "inplace=True did not return q"
    else:
        out = torch.full_like(q, float("nan"))
        got = cukiln.kv_append(q, case["k_new"], case["v_new"], case["k_cache"], case["v_cache"], case["kv_lens"],
                               out=out, **kw)
        if got is not out:
            return "out= was not returned"
    if not torch.equal(case["kv_lens_out"], case["kv_lens"] + q.shape[1]):
        return f"kv_lens_out: {case['kv_lens_out'].tolist()}, not kv_lens + n"
    fits = ~torch.isnan(ref_q.flatten(1)).any(dim=1)
    problem = compare(got[fits], ref_q[fits])
    if problem is not None:
        return f"query: {problem}"
    span = slice(ROTARY_OFFSET, ROTARY_OFFSET + ROTARY_DIM)
    if not torch.isnan(got[~fits][..., span].float()).all():
        return "the row that does not fit: its rotated query features are not all NaN"
    if case["k_cache"].dtype == torch.float8_e4m3fn:  # the slots the reference writes: over a NaN code, none stays
        marked = tuple(torch.full_like(c.view(torch.uint8), 0x7F).view(c.dtype) for c in before)
        reference_kv_append(q, case["k_new"], case["v_new"], *marked, case["kv_lens"], **{**kw, "kv_lens_out": None})
        return check_fp8_caches((case["k_cache"], case["v_cache"]), ref_caches, before,
                                tuple(m.view(torch.uint8) != 0x7F for m in marked))
    return check_caches((case["k_cache"], case["v_cache"]), ref_caches, before)


def e4m3_steps(x):
    """FP8 (e4m3) values as signed steps from zero (the code's magnitude, negated for negative codes): two values
    within one step of each other are the two roundings of something between them."""
    import torch

    codes = x.view(torch.uint8).int()
    magnitude = codes & 0x7F
    return torch.where(codes >= 0x80, -magnitude, magnitude)


def check_fp8_caches(caches, ref_caches, before, written) -> str | None:
    """None when FP8 caches an append wrote match the float64 reference's: each written key and value within one
    e4m3 step of the reference's rounding (the kernel scales and rotates in fp32, the reference in float64: a value
    within a rounding of a step boundary may round to either side), every other slot keeping its bits."""
    import torch

    for name, cache, ref, old, mask in zip(("k_cache", "v_cache"), caches, ref_caches, before, written):
        if not torch.equal(cache.view(torch.uint8)[~mask], old.view(torch.uint8)[~mask]):
            return f"{name}: a slot outside the appended ones changed"
        steps = (e4m3_steps(cache[mask]) - e4m3_steps(ref[mask])).abs()
        if steps.numel() and steps.max() > 1:
            return f"{name}: {int((steps > 1).sum())} values more than one e4m3 step from the reference's"
    return None


def check_caches(caches, ref_caches, before) -> str | None:
    """None when the (key, value) caches an append wrote match the float64 reference's (``ref_caches``, written by
    reference_kv_append on copies of ``before``): the rotated keys within the tolerance, the values bit for bit, and
    every slot the reference did not write keeping its bits."""
    import torch

    for name, cache, ref, old in zip(("k_cache", "v_cache"), caches, ref_caches, before):
        written = ref != old
        if not torch.equal(cache[~written], old[~written]):
            return f"{name}: a slot outside the appended ones changed"
        problem = compare(cache[written], ref[written].double()) if name == "k_cache" else (
            None if torch.equal(cache[written], ref[written]) else "values not copied bit for bit")
        if problem is not None:
            return f"{name}: {problem}"
    return None


def check_variant(entry: dict) -> str | None:
    """Force the variant with these axes (bhsd caches, out of place), then again in place on bshd caches, then (sm_89
    on) out of place on FP8 bhsd caches; a kernel of any angle source with each source it serves, the sources taking
    those forms in turn."""
    import torch

    from cukiln.generated import dispatch
    from cukiln.kv_append_api import plan_call

    dev = torch.device("cuda")
    gen = new_generator()
    # FP8 caches (a run-time choice of every variant) where the GPU writes them: sm_89 on
    fp8 = torch.cuda.get_device_capability() >= (8, 9)
    forms = (("bhsd", False, False), ("bshd", True, False), ("bhsd", False, True))[:2 + fp8]
    for (layout, inplace, cache8), source in with_each_source(dispatch.KV_APPEND, entry, forms):
        case = kv_append_case({**entry["axes"], "angles": source}, gen, dev, layout, fp8=cache8)
        args = {name: value for name, value in case.items() if name not in ("q", "k_new", "v_new", "k_cache",
                                                                           "v_cache", "kv_lens")}
        plan = plan_call(case["q"], case["k_new"], case["v_new"], case["k_cache"], case["v_cache"], case["kv_lens"],
                         inplace=inplace, **args)
        if plan.symbol != entry["name"]:
            return f"inputs selected {plan.symbol}, not the variant under test"
        problem = check_case(case, inplace)
        if problem is not None:
            return (f"{layout}{', in place' if inplace else ''}{', FP8 caches' if cache8 else ''}, angles from "
                    f"{source}: {problem}")
    return None
