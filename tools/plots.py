"""PNG plots of benchmark results (matplotlib, the `plots` extra): achieved TB/s per case for cukiln and
each contender, with the same-run copy bandwidth as a line. Works from the JSON alone, on any machine:
`cukiln plot RESULT.json` draws a committed result again.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path



def drawable() -> dict:
    """The benches that have a plot: name -> their hooks' Bench (contenders and case labels)."""
    from .hooks import benches

    return {name: b for name, b in benches().items() if b.contenders and b.label}


def series(result: dict) -> tuple[list[str], dict[str, list[float | None]]]:
    """Case labels and, per contender present in the result, its TB/s per case (None where absent)."""
    bench = drawable()[result["benchmark"]]
    names = list(bench.contenders) + [o for o in result.get("others", []) if o not in bench.contenders]
    labels = [bench.label(c) for c in result["cases"]]
    data = {name: [c[name].get("tbps") if name in c else None for c in result["cases"]] for name in names}
    return labels, {name: values for name, values in data.items() if any(v is not None for v in values)}


def plot(result: dict, path: str | Path) -> Path:
    """Draw ``result`` (a `cukiln bench` JSON) as grouped bars into ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, data = series(result)
    width = 0.8 / max(1, len(data))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(labels) + 2.0), 5.0))
    for i, (name, values) in enumerate(data.items()):
        xs = [j + (i - (len(data) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [v or 0.0 for v in values], width, label=name)
    ax.axhline(result["copy_tbps"], color="black", linestyle="--", linewidth=1,
               label=f"device copy {result['copy_tbps']:.2f} TB/s")
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("achieved TB/s")
    fig.suptitle(f"cukiln bench {result['benchmark']} — {result['device']}, {result['date']}", fontsize=10)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(data) + 1, frameon=False)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(args) -> int:
    console = args.console
    if importlib.util.find_spec("matplotlib") is None:
        console.print("[red]cukiln plot needs matplotlib: pip install 'cukiln[plots]'[/red]")
        return 2
    kinds = drawable()
    for name in args.results:
        try:
            result = json.loads(Path(name).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{name}: cannot read a benchmark result ({e})") from None
        if not isinstance(result, dict) or result.get("benchmark") not in kinds:
            raise ValueError(f"{name}: not a `cukiln bench` result with a plot (benchmark "
                             f"{result.get('benchmark') if isinstance(result, dict) else None!r})")
        out = plot(result, Path(name).with_suffix(".png") if args.out is None else args.out)
        console.print(f"wrote {out}")
    return 0
