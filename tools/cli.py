"""The `cukiln` command line: build (codegen), report, verify, bench, tune and plot (tools).

Benches and tuning rules come from the families' tool hooks (cukiln.tools.hooks). A user mistake (a bad option, a
file that is not there, a GPU command without a GPU) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

from rich.console import Console

from cukiln import __version__

# Piped output is never cut: a console that is not a terminal gets room for the widest table.
_PIPE_WIDTH = 1000


class _Console(Console):
    def on_broken_pipe(self) -> None:  # the reader stopped early (`cukiln report | head`): main() ends quietly
        raise BrokenPipeError


def console() -> Console:
    """The console commands print to: the terminal's width, or unlimited when piped to a file or program."""
    return _Console() if sys.stdout.isatty() else _Console(width=_PIPE_WIDTH)


def _reader_gone() -> int:
    """The program reading our output stopped (``| head``): not an error. What is still buffered goes nowhere."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({e})") from None
    return text


def _page_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(n < 1 or n & (n - 1) for n in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated powers of two (page sizes), e.g. 1,16,64")
    return sizes


def _query_lengths(text: str) -> tuple[int, ...]:
    try:
        lengths = tuple(int(part) for part in text.split(","))
    except ValueError:
        lengths = ()
    if not lengths or any(not 1 <= n <= 16 for n in lengths):
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated query lengths from 1 to 16, e.g. 1,2,4,8")
    return lengths


def _at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse


_positive = _at_least(1, "a positive integer")
_count = _at_least(0, "a count (0 or more)")


def _gpu_here() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _needs_gpu() -> None:
    if not _gpu_here():
        raise ValueError("needs a CUDA GPU, and torch sees none")


def _build(args: argparse.Namespace) -> int:
    from cukiln.codegen import build, check
    from cukiln.core import artifacts

    out_dir = artifacts.generated_dir()
    if args.check:
        return check.check(out_dir, args.console)
    if args.dispatch_only:
        return check.refold_dispatch(out_dir, args.console)
    archs = [a for given in args.arch for a in given.split(",") if a] if args.arch else build.default_archs()
    code = build.build(archs, args.only, args.jobs, out_dir, args.console)
    if code == 0 and _gpu_here():
        _native_ahead(args.console)
    return code


def _native_ahead(console) -> bool:
    """The native hot path for the installed torch, compiled now if it is not yet (so that a first call finds it):
    where it is on stdout, or why it is off on stderr."""
    import torch

    from cukiln import native

    start = time.perf_counter()
    loaded = native.module()
    if loaded is None:
        print(f"the native hot path is off: {native.off_reason()}", file=sys.stderr)
        return False
    console.print(f"the native hot path for torch {torch.__version__}: {loaded.__file__} "
                  f"(ready in {time.perf_counter() - start:.1f} s)", soft_wrap=True)
    return True


def _report(args: argparse.Namespace) -> int:
    from . import report

    return report.main(args)


def _bench(args: argparse.Namespace) -> int:
    from . import bench

    return bench.main(args)


def _verify(args: argparse.Namespace) -> int:
    _needs_gpu()
    from . import verify

    return verify.verify(args.console, args.only, args.out)


def _plot(args: argparse.Namespace) -> int:
    from . import plots

    if args.out is not None and len(args.results) != 1:
        raise ValueError("--out takes one result file")
    return plots.main(args)


def _tune(args: argparse.Namespace) -> int:
    from .hooks import tunes

    _needs_gpu()
    tunes()[args.op](args.console)
    return 0


def _native(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("needs torch (the native hot path serves cukiln's torch ops)") from None
    return 0 if _native_ahead(args.console) else 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not the usage block
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    from cukiln.codegen.build import default_jobs
    from cukiln.core.archs import DEFAULT_ARCHS, MIN_ARCH, RELEASE_ARCHS

    from .hooks import benches, tunes

    p = _Parser(prog="cukiln", description="Ahead-of-time CUDA kernel generator and compiler.")
    p.add_argument("--version", action="version", version=f"cukiln {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    b = sub.add_parser("build", help="render the templates, compile every variant with NVRTC (archs sharing one "
                                     "PTX through ptxas where they can), write generated/; with a GPU here, compile "
                                     "the native hot path for the installed torch too",
                       description="Render the templates, compile every variant with NVRTC (archs sharing one PTX "
                                   "through ptxas where they can, grouped as if the archs a wheel ships, "
                                   f"{', '.join(RELEASE_ARCHS)}, were all built, so an arch's cubins do not depend on "
                                   "--arch) and write generated/. Piped, it prints "
                                   "a line per finished compile job. "
                                   "On a machine with a GPU it then compiles the native hot path for the installed "
                                   "torch (once per torch).")
    b.add_argument("--arch", action="append", metavar="SM",
                   help=f"target arch, repeatable or comma-separated, {MIN_ARCH} or newer (default: "
                        f"{', '.join(DEFAULT_ARCHS)} and the local GPU's; other archs' entries of unchanged modules "
                        "stay in the manifest)")
    b.add_argument("--only", metavar="REGEX", type=_regex,
                   help="build only the variants whose name matches (a partial build)")
    b.add_argument("--jobs", type=_positive, default=default_jobs(), help="compile processes (default: CPU count)")
    b.add_argument("--check", action="store_true",
                   help="compile nothing; exit 1 if generated/ differs from what the templates produce")
    b.add_argument("--dispatch-only", action="store_true",
                   help="compile nothing; rewrite generated/dispatch.py with the tuning data in generated/tuning/ "
                        "(after `cukiln tune`, when the kernels are unchanged)")
    b.set_defaults(func=_build)

    r = sub.add_parser("report", help="variants per op and axis, their resources, the dispatch rules and their "
                                      "tuning data, and warnings (no GPU needed)")
    r.add_argument("--only", metavar="REGEX", type=_regex, help="show only variants whose name matches")
    r.add_argument("--sort", choices=("name", "registers", "spills", "smem", "size", "compile"), default="name",
                   help="order of the variant rows (default: name)")
    r.add_argument("--limit", type=_count, default=40, metavar="N",
                   help="variant rows shown in the text view (default 40, 0 for all; --json has every row)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(func=_report)

    names = sorted(benches())
    bn = sub.add_parser("bench", help="time kernels on the GPU against a same-run device copy and their peers")
    bn.add_argument("op", choices=names + ["overhead"],
                    help="a family's bench (" + ", ".join(names) + "), or overhead: host µs per call on tiny inputs "
                         "for every family's calls beside torch's own small ops")
    bn.add_argument("--out", metavar="JSON",
                    help="write the results here, and a PNG plot beside it when matplotlib is installed")
    bn.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, not for quoting)")
    bn.add_argument("--no-rotate", action="store_true",
                    help="decode only: time every call on one input set, so that K/V which fit in L2 are served "
                         "from it (by default input sets rotate and L2 serves nothing)")
    bn.add_argument("--kv-dtype", choices=("bf16", "fp8_e4m3"), default=None,
                    help="decode and decode-step only: the caches' type (default bf16); fp8_e4m3 times cukiln over "
                         "FP8 caches with scales beside cukiln over bf16 caches of the same values (and, for decode, "
                         "torch's SDPA over them and FlashInfer's FP8 decode), bytes counted as FP8")
    bn.add_argument("--paged", metavar="SIZES", type=_page_sizes,
                    help="decode only: paged caches of these page sizes (comma-separated powers of two, e.g. "
                         "1,16,64): cukiln's paged decode over an NHD pool of the same keys in shuffled page order "
                         "beside its fixed-capacity decode and FlashInfer's paged batch decode (CUDA and tensor "
                         "cores) on the same pages; with --kv-dtype fp8_e4m3 over FP8 pages")
    bn.add_argument("--q-len", metavar="NS", type=_query_lengths,
                    help="decode only: n query tokens a row (comma-separated, 1 to 16, e.g. 1,2,4,8; speculative "
                         "verification): cukiln beside torch's SDPA with a causal mask, FlashInfer's causal batch "
                         "prefill over a page-16 copy and, at n = 1, its batch decodes; with cukiln's time over its "
                         "own at n = 1 (when 1 is among them) on the same caches")
    bn.add_argument("--only", metavar="REGEX", type=_regex,
                    help="overhead only: time only the paths whose name matches (torch's add_ and y + 1.0, the "
                         "reference points, always run, and the reference each chosen path is paired with); the "
                         "others are neither warmed up nor compiled, and a family whose paths cannot be built (its "
                         "kernels not built) is left out with a line saying why")
    bn.add_argument("--rounds", metavar="N", type=_positive,
                    help="overhead only: rounds each path is timed over (default 7; more give the medians of a "
                         "noisy host's compiled rows, which spread over tens of µs, a steadier reading)")
    bn.set_defaults(func=_bench)

    n = sub.add_parser("native", help="compile the native hot path of the torch ops for the installed torch now (into "
                                      "$CUKILN_CACHE_DIR, default ~/.cache/cukiln; otherwise its first use compiles "
                                      "it, about 40 s) and say where it is, or why it is off (exit status 1)")
    n.set_defaults(func=_native)

    v = sub.add_parser("verify", help="run every manifest variant once against the float64 reference (GPU)")
    v.add_argument("--only", metavar="REGEX", type=_regex, help="verify only the variants whose name matches")
    v.add_argument("--out", metavar="JSON", help="write every variant's result here")
    v.set_defaults(func=_verify)

    pl = sub.add_parser("plot", help="draw `cukiln bench` JSON results as PNG bar charts (matplotlib)")
    pl.add_argument("results", nargs="+", metavar="JSON", help="benchmark results (written by bench --out)")
    pl.add_argument("--out", metavar="PNG", help="output file, for one result (default: the JSON's name with .png)")
    pl.set_defaults(func=_plot)

    rules = sorted(tunes())
    t = sub.add_parser("tune", help="measure dispatch choices on this GPU, write its table, generated/tuning/<arch>-<gpu>.json")
    t.add_argument("op", choices=rules, help="the rule to measure: " + ", ".join(rules))
    t.set_defaults(func=_tune)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.console = console()
    try:
        code = args.func(args)
        sys.stdout.flush()  # a reader that stopped early is found here, not at exit
        return code
    except ValueError as e:  # a user mistake: one line, no traceback
        print(f"cukiln {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _reader_gone()


if __name__ == "__main__":
    sys.exit(main())
