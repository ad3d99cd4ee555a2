"""The `cukiln` command line: build here; report, bench, tune and verify through cukiln.tools."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console


def _build(args: argparse.Namespace) -> int:
    from . import build, emit

    console = Console()
    out_dir = emit.generated_dir()
    if args.check:
        return build.check(out_dir, console)
    if args.dispatch_only:
        return build.refold_dispatch(out_dir, console)
    archs = [a for given in args.arch for a in given.split(",") if a] if args.arch else build.default_archs()
    try:
        return build.build(archs, args.only, args.jobs, out_dir, console)
    except ValueError as e:  # bad options: a message, not a traceback
        console.print(f"[red]cukiln build: {e}[/red]")
        return 2


def _report(args: argparse.Namespace) -> int:
    from cukiln.tools import report

    return report.main(args)


def _bench(args: argparse.Namespace) -> int:
    from cukiln.tools import bench

    return bench.main(args)


def _verify(args: argparse.Namespace) -> int:
    import torch

    console = Console()
    if not torch.cuda.is_available():
        console.print("[red]cukiln verify needs a CUDA GPU[/red]")
        return 2
    from cukiln.tools import verify

    return verify.verify(console, args.only, args.out)


def _plot(args: argparse.Namespace) -> int:
    from cukiln.tools import plots

    if args.out is not None and len(args.results) != 1:
        Console().print("[red]cukiln plot: --out takes one result file[/red]")
        return 2
    return plots.main(args)


def _tune(args: argparse.Namespace) -> int:
    import torch

    console = Console()
    if not torch.cuda.is_available():
        console.print("[red]cukiln tune needs a CUDA GPU[/red]")
        return 2
    if args.op == "decode":
        from cukiln.tools import decode

        decode.tune(console)
    elif args.op == "rope":
        from cukiln.tools import rope_tune

        rope_tune.tune(console)
    else:
        from cukiln.tools import thd

        thd.tune(console)
    return 0


def parser() -> argparse.ArgumentParser:
    from .build import DEFAULT_ARCHS, default_jobs

    p = argparse.ArgumentParser(prog="cukiln", description="Ahead-of-time CUDA kernel generator and compiler.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="render the templates, compile every variant with NVRTC (archs sharing one "
                                     "PTX through ptxas where they can), write generated/")
    b.add_argument("--arch", action="append", metavar="SM",
                   help=f"target arch, repeatable or comma-separated (default: {', '.join(DEFAULT_ARCHS)} and the "
                        "local GPU's)")
    b.add_argument("--only", metavar="REGEX", help="build only the variants whose name matches (a partial build)")
    b.add_argument("--jobs", type=int, default=default_jobs(), help="compile processes (default: CPU count)")
    b.add_argument("--check", action="store_true",
                   help="compile nothing; exit 1 if generated/ differs from what the templates produce")
    b.add_argument("--dispatch-only", action="store_true",
                   help="compile nothing; rewrite generated/dispatch.py with the tuning data in generated/tuning/ "
                        "(after `cukiln tune`, when the kernels are unchanged)")
    b.set_defaults(func=_build)

    r = sub.add_parser("report", help="variants per op and axis, their resources, the dispatch rules and their "
                                      "tuning data, and warnings (no GPU needed)")
    r.add_argument("--only", metavar="REGEX", help="show only variants whose name matches")
    r.add_argument("--sort", choices=("name", "registers", "spills", "smem", "size", "compile"), default="name")
    r.add_argument("--limit", type=int, default=40, metavar="N",
                   help="variant rows shown in the text view (default 40, 0 for all; --json has every row)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(func=_report)

    bn = sub.add_parser("bench", help="time kernels on the GPU against a same-run device copy and PyTorch")
    bn.add_argument("op", choices=("rope", "rope-thd", "decode", "overhead"),
                    help="rope: dense layouts against PyTorch; rope-thd: packed sequences, auto vs grid dispatch; "
                         "decode: decode attention against torch SDPA; overhead: host µs per call on a tiny "
                         "tensor (cukiln.rope, the custom op, torch.compile, CUDA graph replay, a torch op)")
    bn.add_argument("--out", metavar="JSON",
                    help="write the results here, and a PNG plot beside it when matplotlib is installed")
    bn.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, not for quoting)")
    bn.add_argument("--no-rotate", action="store_true",
                    help="decode only: time every call on one input set, so that K/V which fit in L2 are served "
                         "from it (by default input sets rotate and L2 serves nothing)")
    bn.set_defaults(func=_bench)

    v = sub.add_parser("verify", help="run every manifest variant once against the float64 reference (GPU)")
    v.add_argument("--only", metavar="REGEX", help="verify only the variants whose name matches")
    v.add_argument("--out", metavar="JSON", help="write every variant's result here")
    v.set_defaults(func=_verify)

    pl = sub.add_parser("plot", help="draw `cukiln bench` JSON results as PNG bar charts (matplotlib)")
    pl.add_argument("results", nargs="+", metavar="JSON", help="benchmark results (written by --out)")
    pl.add_argument("--out", metavar="PNG", help="output file (default: the JSON's name with .png)")
    pl.set_defaults(func=_plot)

    t = sub.add_parser("tune", help="measure dispatch choices on this GPU, write generated/tuning/<arch>.json")
    t.add_argument("op", choices=("rope", "rope-thd", "decode"),
                   help="rope: the dense launch choices (vector width, stride-free kernel, block size); "
                        "rope-thd: the token/grid rule for packed sequences; decode: the split-KV table (K/V "
                        "pipeline and split count, timed over batch x cache length)")
    t.set_defaults(func=_tune)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
