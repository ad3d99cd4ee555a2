"""`cukiln verify` (GPU): every manifest variant forced once against the float64 reference.

Also the GPU tests' ground: how outputs are compared with the reference. Each family's tool hooks
(cukiln.tools.hooks) hold its per-variant check: inputs whose layouts and alignments select exactly that
variant, fresh random draws, outputs NaN-poisoned before each launch, so an unwritten element fails.
"""

from __future__ import annotations

import json
import re

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cukiln.core import artifacts

from .timing import run_metadata

# Comparison: fp32 outputs within 1e-5 of the reference relative to its largest magnitude; fp16/bf16
# within 2 ulp of the reference (rounded to the dtype) plus the fp32 arithmetic's own error,
# ``fp32_units`` x 2**-22 of the largest magnitude.
_MANTISSA_BITS = {"float16": 10, "bfloat16": 7}


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


class NotOnThisGPU(Exception):
    """A variant that needs what this GPU lacks (an arch feature): verify lists it apart, neither passed nor
    failed."""


def check_entry(entry: dict) -> str | None:
    """The check of one manifest entry, by its family's hook; ValueError for an op no family registers."""
    from .hooks import tools_of_op

    return tools_of_op(entry["op"]).check_variant(entry)


def verify(console: Console, only: str | None = None, out: str | None = None) -> int:
    """Run every (matching) manifest variant once; print a pass/fail table; 1 if any failed."""
    import torch

    entries = artifacts.read_manifest().get("variants", [])
    if only:
        entries = [e for e in entries if re.search(only, e["name"])]  # (the CLI checks the regex first)
    results = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"verifying {len(entries)} variants", total=len(entries))
        for entry in entries:
            result = {"name": entry["name"], "op": entry["op"]}
            try:
                problem = check_entry(entry)
            except NotOnThisGPU as e:
                result.update(ok=None, not_on_this_gpu=str(e))
            except Exception as e:  # a crash is a failure of this variant, reported with the others
                problem = f"{type(e).__name__}: {e}"
            if "not_on_this_gpu" not in result:
                result.update(ok=problem is None, problem=problem)
            results.append(result)
            progress.advance(task)
    torch.cuda.synchronize()
    table = Table(title=f"cukiln verify on {torch.cuda.get_device_name()}", title_justify="left")
    for col in ("op", "variants", "passed", "failed", "not on this GPU"):
        table.add_column(col, justify="left" if col == "op" else "right")
    for op in sorted({r["op"] for r in results}):
        mine = [r for r in results if r["op"] == op]
        failed = sum(r["ok"] is False for r in mine)
        passed = sum(r["ok"] is True for r in mine)
        table.add_row(op, str(len(mine)), str(passed), f"[red]{failed}[/red]" if failed else "0",
                      str(len(mine) - passed - failed))
    console.print(table)
    apart = [r for r in results if r["ok"] is None]
    if apart:
        console.print(f"[yellow]{len(apart)} variants not run on this GPU[/yellow] ({apart[0]['name']}: "
                      f"{apart[0]['not_on_this_gpu']}{' ...' if len(apart) > 1 else ''})")
    failures = [r for r in results if r["ok"] is False]
    for r in failures[:20]:
        console.print(f"[red]FAIL[/red] {r['name']}: {r['problem']}")
    if len(failures) > 20:
        console.print(f"... and {len(failures) - 20} more")
    if out:
        with open(out, "w") as f:
            command = "cukiln verify" + (f" --only {only}" if only else "")
            json.dump({**run_metadata("verify", command), "results": results}, f, indent=1)
    ran = len(results) - len(apart)
    console.print(f"[red]{len(failures)} of {ran} variants run failed[/red]" if failures
                  else "[yellow]no variant matched --only[/yellow]" if not results
                  else "[yellow]no variant ran on this GPU[/yellow]" if not ran
                  else "[green]every variant matches the reference[/green]" + (
                      f" (every one this GPU runs; {len(apart)} need another)" if apart else ""))
    return 1 if failures or not ran else 0
