"""Packed-sequence (thd) RoPE on the GPU: `cukiln tune rope-thd` and `cukiln bench rope-thd`.

Both time token and grid dispatch on the same inputs (CUDA events, median, rotating buffers) through
CUKILN_ROPE_THD_DISPATCH, forward then backward, bf16, h = 32, d = 128, freqs angles. tune fits the
rule that auto dispatch applies (grid while its blocks are at most G times the token path's) and writes
this GPU's generated/tuning/<arch>-<gpu>.json; the next `cukiln build` folds G into dispatch.py. bench shows the auto
path across sequence counts beside grid dispatch, as a ratio of a same-run copy.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps

HEADS, HEAD_DIM = 32, 128
BENCH_TOKENS = 65536
BENCH_SEQS = (1, 8, 32, 128, 512, 1024, 2401)
TUNE_TOKENS = (8192, 65536)
TUNE_SEQS = (1, 4, 16, 64, 256, 1024)


def split_lengths(tokens: int, n_seqs: int, skew: bool = False) -> list[int]:
    """n_seqs lengths summing to tokens: as equal as integers allow, or (skew) one sequence holding half."""
    if skew and n_seqs > 1:
        rest = split_lengths(tokens - tokens // 2, n_seqs - 1)
        return [tokens // 2] + rest
    q, r = divmod(tokens, n_seqs)
    return [q + (i < r) for i in range(n_seqs)]


def dispatch_mode(mode: str):
    """A block whose thd rope calls take ``mode`` (token, grid or auto) dispatch."""
    from cukiln.overrides import forced

    return forced("rope_thd_dispatch", mode)


def time_case(lengths: list[int], modes: tuple[str, ...], hint: bool = True) -> dict:
    """Forward + backward milliseconds per dispatch mode, the bytes moved and each mode's block count."""
    import torch

    import cukiln
    from cukiln import rope_api

    tokens = sum(lengths)
    cu = torch.tensor([0] + lengths, dtype=torch.int32).cumsum(0).to(torch.int32).cuda()
    longest = max(lengths)
    freqs = torch.rand(longest, 1, 1, HEAD_DIM, device="cuda") * 100
    x_bytes = tokens * HEADS * HEAD_DIM * 2
    nbytes = 2 * (2 * x_bytes + longest * HEAD_DIM * 4)  # forward and backward
    sets = rotating_sets(lambda: (torch.randn(tokens, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
                                  torch.empty(tokens, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)),
                         2 * x_bytes)
    kw = dict(freqs=freqs, layout="thd", cu_seqlens=cu, max_seqlen=longest if hint else None)
    row = {"lengths": {"n_seqs": len(lengths), "tokens": tokens, "longest": longest}, "bytes": nbytes, "hint": hint}
    for mode in modes:
        with dispatch_mode(mode):
            plan, _ = rope_api.plan_call(sets[0][0], out=sets[0][1], **kw)
            calls = [lambda x=x, o=o: (cukiln.rope(x, out=o, **kw), cukiln.rope(o, out=x, backward=True, **kw))
                     for x, o in sets]
            ms = median_ms(calls, batches=9 if plan.grid[0] * plan.grid[1] > 2**22 else 15)
        row[mode] = {"ms": ms, "tbps": tbps(nbytes, ms), "dispatch": plan.key[6],
                     "blocks": plan.grid[0] * plan.grid[1], "tokens_per_block": plan.block[2]}
    return row


# Timing noise between two runs of the same kernel: grid within this of token counts as a tie.
TIE = 0.01


def fit_grid_max_waste(rows: list[dict]) -> float:
    """The largest waste (grid blocks / token blocks) up to which grid was never slower than token (ties
    within TIE included); 0 when grid lost even without waste."""
    cases = sorted((r["grid"]["blocks"] / r["token"]["blocks"], r["grid"]["ms"] <= r["token"]["ms"] * (1 + TIE))
                   for r in rows)
    limit = 0.0
    for waste, grid_wins in cases:
        if not grid_wins:
            break
        limit = waste
    return limit


def tune(console: Console) -> dict:
    from ..tuning import write_tuning

    shapes = [(t, n, skew) for t in TUNE_TOKENS for n in TUNE_SEQS for skew in (False, True) if n > 1 or not skew]
    copy = copy_tbps()
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("rope-thd: token vs grid", total=len(shapes))
        for tokens, n, skew in shapes:
            row = time_case(split_lengths(tokens, n, skew), ("token", "grid"))
            row["skewed"] = skew
            for mode in ("token", "grid"):
                row[mode]["x_copy"] = row[mode]["tbps"] / copy
            rows.append(row)
            progress.advance(task)
    result = run_metadata("tune rope-thd", "cukiln tune rope-thd")
    result["copy_tbps"] = copy
    result["rule"] = {"grid_max_waste": fit_grid_max_waste(rows)}
    result["measurements"] = rows
    path = write_tuning(result["arch"], "rope-thd", result)
    table = Table(title=f"rope-thd token vs grid on {result['device']}", title_justify="left")
    for col in ("tokens", "seqs", "skewed", "grid/token blocks", "token us", "token x copy", "grid us",
                "grid x copy", "winner"):
        table.add_column(col, justify="right")
    for r in rows:
        waste = r["grid"]["blocks"] / r["token"]["blocks"]
        win = "grid" if r["grid"]["ms"] <= r["token"]["ms"] else "token"
        table.add_row(str(r["lengths"]["tokens"]), str(r["lengths"]["n_seqs"]), "yes" if r["skewed"] else "",
                      f"{waste:.2f}", f"{r['token']['ms'] * 1e3:.1f}", f"{r['token']['x_copy']:.3f}",
                      f"{r['grid']['ms'] * 1e3:.1f}", f"{r['grid']['x_copy']:.3f}", win)
    console.print(table)
    console.print(f"rule: grid while grid blocks <= {result['rule']['grid_max_waste']:.2f} x token blocks; "
                  f"wrote {path} (run `cukiln build` to fold it into dispatch.py)")
    return result


def run(console: Console, args=None) -> dict:
    copy = copy_tbps()
    console.print(f"device-to-device copy: {copy:.3f} TB/s (read + write)")
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("rope-thd", total=len(BENCH_SEQS))
        for n in BENCH_SEQS:
            row = time_case(split_lengths(BENCH_TOKENS, n), ("auto", "token", "grid"))
            if n <= 32:  # grid without max_seqlen: blocks for the whole token count per sequence
                row["grid, no max_seqlen"] = time_case(split_lengths(BENCH_TOKENS, n), ("grid",), hint=False)["grid"]
            for mode in ("auto", "token", "grid", "grid, no max_seqlen"):
                if mode in row:
                    row[mode]["x_copy"] = row[mode]["tbps"] / copy
            rows.append(row)
            progress.advance(task)
    autos = [r["auto"]["ms"] for r in rows]
    result = run_metadata("rope-thd", "cukiln bench rope-thd")
    result.update(copy_tbps=copy, cases=rows, auto_spread=max(autos) / min(autos) - 1,
                  auto_min_x_copy=min(r["auto"]["x_copy"] for r in rows))
    return result


def show(result: dict, console: Console) -> None:
    table = Table(title=f"rope-thd fwd+bwd, {BENCH_TOKENS} tokens, h={HEADS}, d={HEAD_DIM}, bf16 on "
                        f"{result['device']} — copy {result['copy_tbps']:.2f} TB/s", title_justify="left")
    for col in ("seqs", "auto us", "auto picks", "auto x copy", "token x copy", "grid x copy",
                "grid, no max_seqlen x copy"):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        nohint = r.get("grid, no max_seqlen")
        table.add_row(str(r["lengths"]["n_seqs"]), f"{r['auto']['ms'] * 1e3:.1f}", r["auto"]["dispatch"],
                      f"{r['auto']['x_copy']:.3f}", f"{r['token']['x_copy']:.3f}", f"{r['grid']['x_copy']:.3f}",
                      f"{nohint['x_copy']:.4f}" if nohint else "—")
    console.print(table)
    console.print(f"auto: time spread across sequence counts {result['auto_spread'] * 100:.1f} %, "
                  f"lowest {result['auto_min_x_copy']:.3f}x copy")
