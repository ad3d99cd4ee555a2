"""`cukiln bench rope` (GPU): cukiln against eager PyTorch and torch.compile, as a ratio of a same-run copy.

Bytes counted: x read once, the output written once, the angle table read once. Achieved TB/s is
bytes over the median time; "x copy" is that over the device-to-device copy bandwidth measured first.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps

SHAPES = ((4096, 1, 128, 128), (512, 32, 24, 128), (4096, 2, 32, 128))  # [s, b, h, d]
VIEWS = ("sbhd", "bshd", "bhsd->bshd")


def torch_rope(x, freqs, layout: str, backward: bool):
    """RoPE in plain PyTorch (per-feature angles, as TransformerEngine's unfused path)."""
    import torch

    rd = freqs.shape[-1]
    f = freqs if layout == "sbhd" else freqs.transpose(0, 1)
    c, s = torch.cos(f).to(x.dtype), torch.sin(f).to(x.dtype)
    t, tail = x[..., :rd], x[..., rd:]

    def rot(v):
        return torch.cat((-v[..., rd // 2:], v[..., : rd // 2]), dim=-1)

    y = t * c - rot(t * s) if backward else t * c + rot(t) * s
    return torch.cat((y, tail), dim=-1) if tail.shape[-1] else y


def make_x(shape, view: str, dtype):
    import torch

    S, B, H, D = shape
    if view == "sbhd":
        return torch.randn(S, B, H, D, device="cuda", dtype=dtype), "sbhd"
    if view == "bshd":
        return torch.randn(B, S, H, D, device="cuda", dtype=dtype), "bshd"
    return torch.randn(B, H, S, D, device="cuda", dtype=dtype).transpose(1, 2), "bshd"


def _case(shape, view, dtype_name, backward, copy, compiled, progress_note) -> dict:
    import torch

    import cukiln

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    S, B, H, D = shape
    elem = torch.finfo(dtype).bits // 8
    x_bytes = S * B * H * D * elem
    freqs = torch.rand(S, 1, 1, D, device="cuda") * 100
    nbytes = 2 * x_bytes + freqs.numel() * 4

    def make():
        x, layout = make_x(shape, view, dtype)
        return x, torch.empty_like(x), layout

    sets = rotating_sets(make, 2 * x_bytes)
    layout = sets[0][2]
    row = {"shape_sbhd": list(shape), "view": view, "dtype": dtype_name, "direction": "bwd" if backward else "fwd",
           "bytes": nbytes}
    contenders = {
        "cukiln": [lambda x=x, o=o: cukiln.rope(x, freqs=freqs, layout=layout, out=o, backward=backward)
                   for x, o, _ in sets],
        "torch": [lambda x=x: torch_rope(x, freqs, layout, backward) for x, _, _ in sets],
        "torch.compile": [lambda x=x: compiled(x, freqs, layout, backward) for x, _, _ in sets],
    }
    for name, calls in contenders.items():
        ms = median_ms(calls)
        rate = tbps(nbytes, ms)
        row[name] = {"ms": ms, "tbps": rate, "x_copy": rate / copy}
    row["speedup_vs_compile"] = row["torch.compile"]["ms"] / row["cukiln"]["ms"]
    progress_note()
    return row


def _partial_in_place(copy: float) -> dict:
    """In place with rotary_dim = d/4 versus the out-of-place full-width call on the same tensor."""
    import torch

    import cukiln

    S, B, H, D = SHAPES[0]
    f_full = torch.rand(S, 1, 1, D, device="cuda") * 100
    f_quarter = torch.rand(S, 1, 1, D // 4, device="cuda") * 100
    sets = rotating_sets(lambda: (torch.randn(S, B, H, D, device="cuda", dtype=torch.bfloat16),
                                  torch.empty(S, B, H, D, device="cuda", dtype=torch.bfloat16)), 2 * S * B * H * D * 2)
    full = median_ms([lambda x=x, o=o: cukiln.rope(x, freqs=f_full, out=o) for x, o in sets])
    quarter = median_ms([lambda x=x: cukiln.rope(x, freqs=f_quarter, inplace=True) for x, _ in sets])
    moved = 2 * S * B * H * (D // 4) * 2 + f_quarter.numel() * 4
    return {"shape_sbhd": list(SHAPES[0]), "dtype": "bf16", "full_out_of_place_ms": full,
            "quarter_in_place_ms": quarter, "speedup": full / quarter,
            "quarter_in_place_tbps": tbps(moved, quarter), "quarter_in_place_x_copy": tbps(moved, quarter) / copy}


def host_overhead_us() -> dict:
    """Host time per call for a tiny tensor (`cukiln bench overhead` measures more paths)."""
    import torch

    import cukiln

    from ..overhead import per_call_us

    x = torch.randn(1, 1, 1, 64, device="cuda")
    paths = {"cukiln.rope": lambda: cukiln.rope(x, base=10000.0, inplace=True),
             "torch add_ (reference point)": lambda: x.add_(1.0)}
    for fn in paths.values():
        per_call_us(fn, 100)  # warm: module loaded, plan cached
    return {name: per_call_us(fn) for name, fn in paths.items()}


def run(console: Console, args) -> dict:
    quick = args.quick
    import torch

    # Every case is a new static shape: allow one compiled graph per case instead of falling back to eager.
    torch._dynamo.config.cache_size_limit = 256
    torch._dynamo.config.recompile_limit = 256
    compiled = torch.compile(torch_rope, dynamic=False)
    copy = copy_tbps()
    console.print(f"device-to-device copy: {copy:.3f} TB/s (read + write)")
    cases = [(shape, view, "bf16", bwd) for shape in SHAPES for view in VIEWS for bwd in (False, True)]
    cases += [(SHAPES[0], "sbhd", dt, bwd) for dt in ("fp32", "fp16") for bwd in (False, True)]
    if quick:
        cases = cases[:2]
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("rope cases", total=len(cases))
        for shape, view, dt, bwd in cases:
            rows.append(_case(shape, view, dt, bwd, copy, compiled, lambda: progress.advance(task)))
    return {
        **run_metadata("rope", "cukiln bench rope" + (" --quick" if quick else "")),
        "copy_tbps": copy,
        "cases": rows,
        "partial_in_place": _partial_in_place(copy),
        "host_overhead_us": host_overhead_us(),
    }


def show(result: dict, console: Console) -> None:
    table = Table(title=f"rope on {result['device']} — copy {result['copy_tbps']:.2f} TB/s", title_justify="left")
    for col in ("shape [s,b,h,d]", "view", "dtype", "dir", "cukiln TB/s", "x copy", "torch x copy",
                "compile x copy", "vs compile"):
        table.add_column(col, justify="left" if col in ("shape [s,b,h,d]", "view", "dtype", "dir") else "right")
    for r in result["cases"]:
        ok = r["cukiln"]["x_copy"] >= 0.95 and r["speedup_vs_compile"] >= 1.0
        table.add_row(str(r["shape_sbhd"]), r["view"], r["dtype"], r["direction"], f"{r['cukiln']['tbps']:.2f}",
                      f"[{'green' if ok else 'red'}]{r['cukiln']['x_copy']:.3f}[/]",
                      f"{r['torch']['x_copy']:.3f}", f"{r['torch.compile']['x_copy']:.3f}",
                      f"{r['speedup_vs_compile']:.2f}x")
    console.print(table)
    p = result["partial_in_place"]
    console.print(f"in place rotary_dim=d/4: {p['quarter_in_place_ms'] * 1e3:.1f} us vs out-of-place full width "
                  f"{p['full_out_of_place_ms'] * 1e3:.1f} us: {p['speedup']:.2f}x")
    for name, us in result["host_overhead_us"].items():
        console.print(f"host overhead {name}: {us:.2f} us/call")
