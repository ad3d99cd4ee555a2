"""`cukiln verify`'s check of a RoPE variant, and the inputs that select exactly one variant (the GPU tests build
on them too). Inputs are fresh random draws and outputs are NaN-poisoned before each launch."""

from __future__ import annotations

from ..verify import compare, new_generator, torch_dtype

# Packed sequences of the thd variants: 111 tokens, an empty sequence among them.
THD_LENGTHS = (40, 0, 33, 38)


def with_each_source(table: dict, entry: dict, forms: list) -> list[tuple]:
    """(form, angle source) pairs that take every one of ``forms`` and every angle source for which ``table`` (a
    dispatch map of the generated table) picks the manifest ``entry``'s kernel, each in turn: a kernel taking its source
    at run time (angles=any) serves several, each to be checked, without multiplying the forms by them."""
    at = list(entry["axes"]).index("angles")
    sources = list(dict.fromkeys(key[at] for key, served in table.items() if served[1] == entry["name"]))
    return [(forms[i % len(forms)], sources[i % len(sources)]) for i in range(max(len(forms), len(sources)))]


def rope_angle_args(angles: str, dtype, max_pos: int, rd: int, gen, dev) -> dict:
    """Random angle-source arguments of the given kind, with an mscale other than 1 (the GPU tests cover the
    default one)."""
    import torch

    return {**_angle_source(angles, dtype, max_pos, rd, gen, dev),
            "mscale": 0.8 + 0.8 * torch.rand(1, generator=gen, device=dev).item()}


def _angle_source(angles: str, dtype, max_pos: int, rd: int, gen, dev) -> dict:
    import torch

    if angles == "freqs":  # per-feature angles, so that partners' angles differ (TE's general case)
        return {"freqs": (torch.rand(max_pos, 1, 1, rd, generator=gen, device=dev) * 200 - 100)}
    if angles in ("cossin", "cossinf32"):
        width = rd // 2 if torch.rand(1, generator=gen, device=dev).item() < 0.5 else rd
        theta = torch.rand(max_pos, width, generator=gen, device=dev, dtype=torch.float64) * 100
        cache_dtype = torch.float32 if angles == "cossinf32" else dtype
        return {"cos": theta.cos().to(cache_dtype), "sin": theta.sin().to(cache_dtype), "rotary_dim": rd}
    if angles == "invfreq":
        inv = 1.0 / (10000.0 ** (torch.arange(0, rd, 2, device=dev, dtype=torch.float32) / rd))
        return {"inv_freq": inv, "rope_scale": 0.5 + torch.rand(1, generator=gen, device=dev).item()}
    return {"base": 10000.0, "rotary_dim": rd, "rope_scale": 0.75}


def rope_position_args(axes: dict, S: int, B: int, offset: int, max_pos: int, rd: int, gen, dev) -> dict:
    """The positions of the variant's kind: ``offset`` added to each index, or for M-RoPE variants three random
    rows [3, B, S] in the table, random sections of the rd / 2 pairs, chunked or interleaved at random."""
    import torch

    if not axes.get("mrope"):
        return {"offsets": offset}
    cuts = sorted(torch.randint(0, rd // 2 + 1, (2,), generator=gen, device=dev).tolist())
    return {"positions": torch.randint(0, max_pos, (3, B, S), generator=gen, device=dev),
            "mrope_section": (cuts[0], cuts[1] - cuts[0], rd // 2 - cuts[1]),
            "mrope_interleaved": bool(torch.rand(1, generator=gen, device=dev).item() < 0.5)}


def rope_x_for(strides: int, vec: int, itemsize: int, shape, dtype, gen, dev):
    """A random sbhd x whose layout and alignment select exactly (strides, vec)."""
    import torch

    S, B, H, D = shape
    widest = 16 // itemsize
    off = 0 if vec == widest else vec  # an element offset that caps the pointer alignment at vec
    if strides == 0:
        buf = torch.randn(S * B * H * D + 16, generator=gen, device=dev).to(dtype)
        return buf[off:off + S * B * H * D].view(S, B, H, D)
    if strides == 3:  # padded heads: last dim contiguous, not packed
        return torch.randn(S, B, H, D + 16, generator=gen, device=dev).to(dtype)[..., off:off + D]
    return torch.randn(S, B, H, 2 * D, generator=gen, device=dev).to(dtype)[..., ::2]


def check_rope_variant(axes: dict, name: str) -> str | None:
    """Force the RoPE variant with these axes, forward then backward (a kernel argument); None when both
    match the reference, else why not."""
    if axes.get("tensors", 1) == 2:
        return check_rope_qk_variant(axes, name)
    import torch

    import cukiln
    from cukiln.rope_api import plan_call

    from .thd import dispatch_mode

    dev = torch.device("cuda")
    gen = new_generator()
    dtype = torch_dtype(axes["dtype"])
    thd = axes["layout"] == "thd"
    shape = (sum(THD_LENGTHS), 1, 5, 64) if thd else (37, 3, 5, 64)
    rd, offset = 48, 3  # partial rotary: features 48..63 are copied through
    max_pos = shape[0] + offset + 5
    x = rope_x_for(axes["strides"], axes["vec"], torch.finfo(dtype).bits // 8, shape, dtype, gen, dev)
    kwargs = dict(rope_angle_args(axes["angles"], dtype, max_pos, rd, gen, dev),
                  **rope_position_args(axes, shape[0], shape[1], offset, max_pos, rd, gen, dev),
                  interleaved=axes["pairing"] == "interleaved")
    mode = "auto"
    if thd:
        x = x[:, 0]
        shape = x.shape
        cu = torch.tensor((0,) + THD_LENGTHS, device=dev).cumsum(0).to(torch.int32)
        kwargs.update(layout="thd", cu_seqlens=cu, max_seqlen=max(THD_LENGTHS))
        mode = axes["dispatch"]
    for backward in (False, True):
        out = torch.full(shape, float("nan"), device=dev, dtype=dtype)
        with dispatch_mode(mode):
            plan, _ = plan_call(x, out=out, backward=backward, **kwargs)
            if plan.symbol != name:
                return f"inputs selected {plan.symbol}, not the variant under test"
            cukiln.rope(x, out=out, backward=backward, **kwargs)
        problem = compare(out, cukiln.reference.rope(x, backward=backward, **kwargs))
        if problem is None and not torch.equal(out[..., rd:], x[..., rd:]):
            problem = "the pass-through tail was not copied bit for bit"
        if problem is not None:
            return f"{'backward' if backward else 'forward'}: {problem}"
    return None


def check_rope_qk_variant(axes: dict, name: str) -> str | None:
    """Force the _qk variant with these axes: rope_qk on q (5 heads) and k (3 heads, its own strides), a rotated
    span inside the head (features 16..63; 0..15 copied through), forward then backward; None when q's and k's
    outputs match the reference, else why not."""
    import torch

    import cukiln
    from cukiln.rope_api import plan_call

    dev = torch.device("cuda")
    gen = new_generator()
    dtype = torch_dtype(axes["dtype"])
    itemsize = torch.finfo(dtype).bits // 8
    rd, start, offset = 48, 16, 3
    q = rope_x_for(axes["strides"], axes["vec"], itemsize, (37, 3, 5, 64), dtype, gen, dev)
    k = rope_x_for(axes["strides"], axes["vec"], itemsize, (37, 3, 3, 64), dtype, gen, dev)
    kwargs = dict(rope_angle_args(axes["angles"], dtype, 37 + offset + 5, rd, gen, dev),
                  **rope_position_args(axes, 37, 3, offset, 37 + offset + 5, rd, gen, dev),
                  interleaved=axes["pairing"] == "interleaved", rotary_dim=rd, rotary_offset=start)
    for backward in (False, True):
        q_out, k_out = (torch.full_like(t, float("nan")) for t in (q, k))
        plan, _ = plan_call(q, k=k, k_out=k_out, out=q_out, backward=backward, **kwargs)
        if plan.symbol != name or plan.then is not None:
            return f"inputs selected {plan.symbol} (and a second launch: {plan.then is not None}), not the variant"
        got = cukiln.rope_qk(q, k, out=(q_out, k_out), backward=backward, **kwargs)
        if got[0] is not q_out or got[1] is not k_out:
            return "rope_qk did not return the out= pair"
        for what, x, out in (("q", q, q_out), ("k", k, k_out)):
            problem = compare(out, cukiln.reference.rope(x, backward=backward, **kwargs))
            if problem is None and not torch.equal(out[..., :start], x[..., :start]):
                problem = "the features before the rotated span were not copied bit for bit"
            if problem is not None:
                return f"{'backward' if backward else 'forward'}, {what}: {problem}"
    return None
