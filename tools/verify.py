"""`cukiln verify` (GPU): every manifest variant forced once against the float64 reference.

Also the GPU tests' ground: how a variant's inputs are built (layouts and alignments that select exactly
that variant), how outputs are compared with the reference, and the per-variant check the tests run.
Inputs are fresh random draws and outputs are NaN-poisoned before each launch, so an unwritten element
fails the comparison.
"""

from __future__ import annotations

import json
import re

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cukiln.codegen.decode_variants import Pipeline

from .overrides import env_override
from .timing import run_metadata

# Comparison: fp32 outputs within 1e-5 of the reference relative to its largest magnitude; fp16/bf16
# within 2 ulp of the reference (rounded to the dtype) plus the fp32 arithmetic's own error,
# ``fp32_units`` x 2**-22 of the largest magnitude.
_MANTISSA_BITS = {"float16": 10, "bfloat16": 7}
# Decode: fp32 logits carry a relative error of about d x 2**-24, which exp turns into an absolute error of
# the weights: 2**-16 x max|ref| on top of 2 ulp (still 128x below a bf16 ulp at the largest value).
DECODE_FP32_UNITS = 64
# Packed sequences of the thd variants: 111 tokens, an empty sequence among them.
THD_LENGTHS = (40, 0, 33, 38)
# Element offset of a decode cache view inside its buffer that caps the copy width at each vector width.
DECODE_OFFSET_FOR_VEC = {8: 0, 4: 4, 2: 2, 1: 1}


def torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def ulp(values, dtype):
    """The spacing of ``dtype`` at each value's magnitude (float64)."""
    import torch

    mag = values.abs().to(torch.float64)
    exponent = torch.floor(torch.log2(mag.clamp_min(torch.finfo(dtype).tiny)))
    return torch.pow(2.0, exponent - _MANTISSA_BITS[str(dtype).replace("torch.", "")])


def compare(out, ref, *, fp32_units: float = 4) -> str | None:
    """None when ``out`` matches the float64 ``ref`` within the tolerance above, else what is wrong."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    if torch.isnan(ref).any():
        return "the reference itself has NaNs"
    got = out.to(torch.float64)
    nan = torch.isnan(got)
    if nan.any():
        return f"{int(nan.sum())} output elements unwritten or NaN"
    scale = ref.abs().max().item() if ref.numel() else 1.0
    scale = scale or 1.0
    err = (got - ref).abs()
    if out.dtype == torch.float32:
        worst = err.max().item() / scale if err.numel() else 0.0
        return None if worst <= 1e-5 else f"max error {worst:.3g} x max|ref| > 1e-5"
    tol = 2 * ulp(ref.to(out.dtype).to(torch.float64), out.dtype) + fp32_units * 2.0**-22 * scale
    bad = err > tol
    if not bad.any():
        return None
    worst = (err / tol).flatten().argmax()
    return (f"{int(bad.sum())} elements beyond 2 ulp; worst |err| {err.flatten()[worst].item():.3g} at ref "
            f"{ref.flatten()[worst].item():.4g}, {err.flatten()[worst].item() / tol.flatten()[worst].item():.2f}x "
            "the tolerance")


def new_generator():
    import torch

    gen = torch.Generator(device="cuda")
    gen.seed()
    return gen


# --- RoPE ------------------------------------------------------------------------------------------


def rope_angle_args(angles: str, dtype, max_pos: int, rd: int, gen, dev) -> dict:
    """Random angle-source arguments of the given kind."""
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
        return {"inv_freq": inv, "scale": 0.5 + torch.rand(1, generator=gen, device=dev).item()}
    return {"base": 10000.0, "rotary_dim": rd, "scale": 0.75}


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
    kwargs = dict(rope_angle_args(axes["angles"], dtype, max_pos, rd, gen, dev), offsets=offset,
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


# --- decode attention --------------------------------------------------------------------------------


def decode_cache_view(b, h_kv, T, d, dtype, gen, *, layout="bhsd", capacity=None, offset=0, strided_d=False):
    """A [b, h_kv, T, d] (or bshd) slice of a larger random buffer of ``capacity`` positions, starting
    ``offset`` elements into its storage; with ``strided_d`` every other element of a 2d-wide last axis."""
    import torch

    capacity = capacity or T + 5
    width = 2 * d if strided_d else d
    dims = (b, h_kv, capacity, width) if layout == "bhsd" else (b, capacity, h_kv, width)
    n = b * h_kv * capacity * width
    storage = torch.randn(n + offset, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    full = storage[offset:].view(dims)
    view = full[:, :, :T] if layout == "bhsd" else full[:, :T]
    return view[..., ::2] if strided_d else view


def check_lse(lse, ref_lse) -> str | None:
    """None when the fp32 log-sum-exp matches the reference (-inf rows exactly, others to 1e-5)."""
    import torch

    if not torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse)):
        return "log-sum-exp: rows without keys must be -inf, and only those"
    finite = torch.isfinite(ref_lse)
    err = (lse.double() - ref_lse)[finite].abs()
    bound = 1e-5 * ref_lse[finite].abs().clamp_min(1.0)
    return None if (err <= bound).all() else f"log-sum-exp error {err.max().item():.3g}"


def run_decode_and_compare(q, k, v, kv_lens, **kwargs) -> tuple[str | None, object, object]:
    """decode_attention into a NaN-poisoned out, compared with the reference: (problem, out, lse)."""
    import torch

    import cukiln

    out = torch.full_like(q, float("nan"))
    got, lse = cukiln.decode_attention(q, k, v, kv_lens, out=out, return_lse=True, **kwargs)
    if got is not out:
        return "out= was not the tensor returned", out, lse
    kwargs.pop("num_splits", None)
    ref, ref_lse = cukiln.reference.decode_attention(q, k, v, kv_lens, return_lse=True, **kwargs)
    problem = compare(out.reshape(ref.shape), ref, fp32_units=DECODE_FP32_UNITS) or check_lse(lse, ref_lse)
    return problem, out, lse


def check_decode_variant(axes: dict, name: str, splits: tuple[int, ...] = (1, 3, 20)) -> str | None:
    """Force the decode variant with these axes (random lengths per row, left padding, GQA 4) once per
    split count: 1 (one pass, the output written directly), else split-KV: merged in a cluster (sm_90 on,
    at most MAX_CLUSTER_SPLITS splits) or as partial results merged by the combine kernel."""
    import torch

    from cukiln.decode_api import plan_call

    gen = new_generator()
    dtype, d = torch_dtype(axes["dtype"]), axes["head_dim"]
    b, h_kv, group, T = 3, 2, 4, 300
    q = torch.randn(b, h_kv * group, d, generator=gen, device="cuda").to(dtype)
    k, v = (decode_cache_view(b, h_kv, T, d, dtype, gen, offset=DECODE_OFFSET_FOR_VEC[axes["vec"]],
                              strided_d=axes["strides"] == 4) for _ in range(2))
    lens = torch.tensor([T, 1, 177], dtype=torch.int32, device="cuda")
    start = torch.tensor([0, 0, 40], dtype=torch.int32, device="cuda")
    with forced_decode_pipeline(axes.get("pipeline", Pipeline.NARROW.value)):
        for num_splits in splits:
            kwargs = dict(kv_start=start, num_splits=num_splits)
            plan = plan_call(q, k, v, lens, **kwargs)
            if plan.attention.symbol != name:
                return f"inputs selected {plan.attention.symbol}, not the variant under test"
            combine = plan.combine.symbol if plan.combine is not None else None
            merged_by_kernel = num_splits > 1 and plan.attention.cluster == 1
            if combine != (f"decode_combine_{axes['dtype']}_d{d}" if merged_by_kernel else None):
                return f"{num_splits} splits (clusters of {plan.attention.cluster}) paired with combine kernel {combine}"
            problem = run_decode_and_compare(q, k, v, lens, **kwargs)[0]
            if problem is not None:
                return f"{num_splits} splits: {problem}"
    return None


def forced_decode_pipeline(pipeline: str):
    """A block whose decode calls run the K/V ``pipeline`` (CUKILN_DECODE_PIPELINE), whatever the table says."""
    from cukiln.decode_plan import PIPELINE_ENV

    return env_override(PIPELINE_ENV, pipeline)


def check_entry(entry: dict) -> str | None:
    """The check of one manifest entry; a combine kernel is checked through a split launch that uses it."""
    axes = entry["axes"]
    if entry["op"] == "rope":
        return check_rope_variant(axes, entry["name"])
    if entry["op"] == "decode":
        return check_decode_variant(axes, entry["name"])
    from cukiln.decode_plan import MAX_CLUSTER_SPLITS

    # more splits than a cluster holds: merged by the combine kernel on every GPU
    attention = {**axes, "strides": 3, "vec": 8}
    return check_decode_variant(attention, f"decode_{axes['dtype']}_d{axes['head_dim']}_s3_v8",
                                splits=(MAX_CLUSTER_SPLITS + 4,))


def verify(console: Console, only: str | None = None, out: str | None = None) -> int:
    """Run every (matching) manifest variant once; print a pass/fail table; 1 if any failed."""
    import torch

    from cukiln.codegen import emit

    entries = emit.read_manifest().get("variants", [])
    if only:
        entries = [e for e in entries if re.search(only, e["name"])]
    results = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"verifying {len(entries)} variants", total=len(entries))
        for entry in entries:
            try:
                problem = check_entry(entry)
            except Exception as e:  # a crash is a failure of this variant, reported with the others
                problem = f"{type(e).__name__}: {e}"
            results.append({"name": entry["name"], "op": entry["op"], "ok": problem is None, "problem": problem})
            progress.advance(task)
    torch.cuda.synchronize()
    table = Table(title=f"cukiln verify on {torch.cuda.get_device_name()}", title_justify="left")
    for col in ("op", "variants", "passed", "failed"):
        table.add_column(col, justify="left" if col == "op" else "right")
    for op in sorted({r["op"] for r in results}):
        mine = [r for r in results if r["op"] == op]
        failed = sum(not r["ok"] for r in mine)
        table.add_row(op, str(len(mine)), str(len(mine) - failed), f"[red]{failed}[/red]" if failed else "0")
    console.print(table)
    failures = [r for r in results if not r["ok"]]
    for r in failures[:20]:
        console.print(f"[red]FAIL[/red] {r['name']}: {r['problem']}")
    if len(failures) > 20:
        console.print(f"... and {len(failures) - 20} more")
    if out:
        with open(out, "w") as f:
            command = "cukiln verify" + (f" --only {only}" if only else "")
            json.dump({**run_metadata("verify", command), "results": results}, f, indent=1)
    console.print("[green]every variant matches the reference[/green]" if not failures and results
                  else f"[red]{len(failures)} of {len(results)} variants failed[/red]" if failures
                  else "[yellow]no variant matched --only[/yellow]")
    return 1 if failures or not results else 0
