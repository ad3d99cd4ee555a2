"""`cukiln bench decode-step` (GPU): one decode step of an attention layer (rotate the new query and key, write the
new key and value into the cache at each row's length, attend) on GQA 32/8, d 128, bf16, a cos|sin cache, over batch
x cache length: cukiln.decode_step; cukiln's separate calls (rope_qk, a torch index write, decode_attention); torch
(the rotation formula, index writes, SDPA over the cache slice); FlashInfer's three calls on a page-16 cache
(`apply_rope_with_cos_sin_cache_inplace`, `append_paged_kv_cache`, the batch decode wrapper) when it imports; and
decode_attention alone (the bar the fused step is held to). GPU time per step (CUDA events, bench conditions, one
input set: caches of b x L <= 8 x 8k fit in L2 and are served from it, alike for every contender) eager and replayed
from a CUDA graph; host time per eager step beside torch's add_. Each contender's attention output is
checked against cukiln's float64 reference at one small point before anything is timed.
"""

from __future__ import annotations

import itertools

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from .timing import copy_tbps, median_ms, run_metadata, tbps

HEADS_Q, HEADS_KV, HEAD_DIM, PAGE = 32, 8, 128, 16
GRID = tuple(itertools.product((1, 8, 32, 128), (2048, 8192, 32768)))
QUICK = ((1, 2048), (8, 8192), (128, 32768))  # --quick: three points across the grid
SLACK = 256  # cache slots beyond the current length (rounded up to whole pages)
ERROR_LIMIT = 2e-2


def step_bytes(b: int, L: int) -> int:
    """What a step must move: the L + 1 keys and values of every row read once, the new q, k and v read and the
    rotated q and the new key and value written."""
    return 2 * b * HEADS_KV * (L + 1) * HEAD_DIM * 2 + 2 * b * (HEADS_Q + 2 * HEADS_KV) * HEAD_DIM * 2


def _setup(b: int, L: int) -> dict:
    """Caches of capacity L + SLACK holding L tokens a row, a fused projection's q, k, v for the new token."""
    import torch

    T = -(-(L + SLACK) // PAGE) * PAGE  # whole pages, so that FlashInfer's copy holds the same slots
    bf16 = torch.bfloat16
    s = {"b": b, "L": L, "T": T}
    s["k_cache"] = torch.empty(b, HEADS_KV, T, HEAD_DIM, device="cuda", dtype=bf16).normal_()
    s["v_cache"] = torch.empty(b, HEADS_KV, T, HEAD_DIM, device="cuda", dtype=bf16).normal_()
    qkv = torch.randn(b, (HEADS_Q + 2 * HEADS_KV) * HEAD_DIM, device="cuda").to(bf16)
    s["q2"], s["k2"] = qkv[:, : HEADS_Q * HEAD_DIM], qkv[:, HEADS_Q * HEAD_DIM:(HEADS_Q + HEADS_KV) * HEAD_DIM]
    s["q"], s["k"] = s["q2"].view(b, HEADS_Q, HEAD_DIM), s["k2"].view(b, HEADS_KV, HEAD_DIM)
    s["v"] = qkv[:, (HEADS_Q + HEADS_KV) * HEAD_DIM:].view(b, HEADS_KV, HEAD_DIM)
    s["lens"] = torch.full((b,), L, dtype=torch.int32, device="cuda")
    s["lens_after"] = s["lens"] + 1
    s["pos"] = s["lens"].long()
    s["rows"] = torch.arange(b, device="cuda")
    inv = 1.0 / (1e4 ** (torch.arange(0, HEAD_DIM, 2, device="cuda", dtype=torch.float64) / HEAD_DIM))
    angles = torch.arange(T, device="cuda", dtype=torch.float64)[:, None] * inv
    s["cos_sin"] = torch.cat((angles.cos(), angles.sin()), dim=1).float()
    s["out"] = torch.empty(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=bf16)
    return s


def _torch_step(s):
    """The plain torch step: the rotation formula on q and k, index writes into the caches, SDPA over the slice."""
    import torch.nn.functional as F

    from .rope.qk_bench import rotate_formula

    q, k = rotate_formula(s["q"], s["k"], s["cos_sin"], s["pos"], False)
    s["k_cache"][s["rows"], :, s["pos"]] = k
    s["v_cache"][s["rows"], :, s["pos"]] = s["v"]
    n = s["L"] + 1
    return F.scaled_dot_product_attention(q.unsqueeze(2), s["k_cache"][:, :, :n], s["v_cache"][:, :, :n],
                                          enable_gqa=True)[:, :, 0]


def _cukiln_separate(s):
    import cukiln

    q, k = cukiln.rope_qk(s["q"], s["k"], cos_sin_cache=s["cos_sin"], positions=s["pos"], layout="thd",
                          inplace=True)
    s["k_cache"][s["rows"], :, s["pos"]] = k
    s["v_cache"][s["rows"], :, s["pos"]] = s["v"]
    return cukiln.decode_attention(q, s["k_cache"], s["v_cache"], s["lens_after"], out=s["out"])


def _flashinfer(s) -> dict | None:
    """FlashInfer's step on a page-16 copy of the caches: (call, None) or None when it does not import."""
    try:
        import flashinfer.decode
        import flashinfer.page
        import flashinfer.rope
        import torch
    except Exception:  # not carried to this machine, or built for another torch
        return None
    b, L, T = s["b"], s["L"], s["T"]
    pages = -(-T // PAGE)
    used = -(-(L + 1) // PAGE)
    paged = torch.empty(b * pages, 2, PAGE, HEADS_KV, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    for i, cache in enumerate((s["k_cache"], s["v_cache"])):  # the same keys and values, page by page
        paged[:, i].view(b, pages, PAGE, HEADS_KV, HEAD_DIM).copy_(
            cache.view(b, HEADS_KV, pages, PAGE, HEAD_DIM).permute(0, 2, 3, 1, 4))
    indptr = torch.arange(b + 1, device="cuda", dtype=torch.int32) * used
    indices = (torch.arange(b, device="cuda", dtype=torch.int32)[:, None] * pages
               + torch.arange(used, device="cuda", dtype=torch.int32)).flatten()
    last = torch.full((b,), L + 1 - (used - 1) * PAGE, device="cuda", dtype=torch.int32)
    wrapper = flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper(
        torch.empty(128 * 2**20, dtype=torch.uint8, device="cuda"), "NHD")
    wrapper.plan(indptr, indices, last, HEADS_Q, HEADS_KV, HEAD_DIM, PAGE, pos_encoding_mode="NONE",
                 q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    batch_indices = torch.arange(b, device="cuda", dtype=torch.int32)
    positions = torch.full((b,), L, device="cuda", dtype=torch.int32)

    def step():
        flashinfer.rope.apply_rope_with_cos_sin_cache_inplace(s["pos"], s["q2"], s["k2"], HEAD_DIM, s["cos_sin"], True)
        flashinfer.page.append_paged_kv_cache(s["k"], s["v"], batch_indices, positions, paged, indices, indptr, last,
                                              "NHD")
        return wrapper.run(s["q"], paged)

    return {"step": step, "paged": paged}


def _graph_ms(fn) -> float:
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return median_ms([graph.replay])


def _contenders(s, flashinfer: bool = True) -> dict:
    """name -> zero-argument step on the inputs ``s``; FlashInfer's (a paged copy of the caches) when asked."""
    import cukiln

    out = {
        "decode_attention alone": lambda: cukiln.decode_attention(s["q"], s["k_cache"], s["v_cache"], s["lens_after"],
                                                                  out=s["out"]),
        "cukiln decode_step": lambda: cukiln.decode_step(s["q"], s["k"], s["v"], s["k_cache"], s["v_cache"],
                                                         s["lens"], cos_sin_cache=s["cos_sin"], out=s["out"]),
        "cukiln separate calls": lambda: _cukiln_separate(s),
        "torch": lambda: _torch_step(s),
    }
    try:
        fi = _flashinfer(s) if flashinfer else None
    except Exception as e:  # an API this build does not have: recorded, the rest still runs
        s["flashinfer_error"] = f"{type(e).__name__}: {e}"[:300]
        fi = None
    if fi is not None:
        out["flashinfer three calls"] = fi["step"]
    return out


def _check(console) -> dict:
    """Each contender's attention output against the float64 reference at b 4, L 300 (before anything is timed)."""
    import torch

    import cukiln

    errors = {}
    for name in ("cukiln decode_step", "cukiln separate calls", "torch", "flashinfer three calls"):
        s = _setup(4, 300)
        ref_caches = s["k_cache"].clone(), s["v_cache"].clone()
        ref = cukiln.reference.decode_step(s["q"], s["k"], s["v"], *ref_caches, s["lens"].clone(),
                                           cos_sin_cache=s["cos_sin"])
        calls = _contenders(s, flashinfer=name == "flashinfer three calls")
        if name not in calls:
            errors[name] = s.get("flashinfer_error", "not importable here")
            continue
        try:
            got = calls[name]().double()
        except Exception as e:  # recorded; the contender is then timed as it comes, flagged wrong
            errors[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        scale = ref.abs().max().item()
        errors[name] = float("inf") if torch.isnan(got).any() else ((got - ref).abs().max() / scale).item()
    return errors


def run(console: Console, args) -> dict:
    import torch

    from .overhead import per_call_us

    copy = copy_tbps()
    console.print(f"device-to-device copy: {copy:.3f} TB/s (read + write)")
    errors = _check(console)
    console.print("largest error relative to the reference's largest magnitude: " +
                  ", ".join(f"{n} {e if isinstance(e, str) else f'{e:.2g}'}" for n, e in errors.items()))
    grid = QUICK if args.quick else GRID
    rows = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("decode-step cases", total=len(grid))
        for b, L in grid:
            s = _setup(b, L)
            row = {"batch": b, "cache_len": L, "bytes": step_bytes(b, L)}
            for name, fn in _contenders(s).items():
                wrong = not isinstance(errors.get(name, 0.0), float) or errors.get(name, 0.0) > ERROR_LIMIT
                try:
                    ms = median_ms([fn])
                    row[name] = {"ms": ms, "tbps": tbps(row["bytes"], ms), "x_copy": tbps(row["bytes"], ms) / copy,
                                 "wrong": wrong}
                except Exception as e:  # recorded, the rest still runs
                    row[name] = {"skipped": f"{type(e).__name__}: {e}"[:300]}
                    continue
                try:
                    row[name]["graph_ms"] = _graph_ms(fn)
                except Exception as e:  # not capturable: recorded
                    row[name]["graph_skipped"] = f"{type(e).__name__}: {e}"[:300]
            if "flashinfer_error" in s:
                row["flashinfer three calls"] = {"skipped": s["flashinfer_error"]}
            rows.append(row)
            del s
            torch.cuda.empty_cache()
            progress.advance(task)
    s = _setup(1, 2048)
    calls = _contenders(s)
    y = torch.randn(1, device="cuda")
    calls["torch: y.add_(1.0)"] = lambda: y.add_(1.0)
    host = {}
    for name, fn in calls.items():
        per_call_us(fn, 300)
        host[name] = sorted(per_call_us(fn, 2000) for _ in range(5))[2]
    return {**run_metadata("decode-step", "cukiln bench decode-step" + (" --quick" if args.quick else "")),
            "shape": {"heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "dtype": "bf16",
                      "page_size": PAGE, "capacity": f"cache_len + {SLACK}"},
            "copy_tbps": copy, "max_rel_err": errors, "cases": rows, "host_us_b1": host}


def show(result: dict, console: Console) -> None:
    names = ("decode_attention alone", "cukiln decode_step", "cukiln separate calls", "flashinfer three calls",
             "torch")
    table = Table(title=f"decode step on {result['device']} (GQA 32/8, d 128, bf16): us per step, eager / graph",
                  title_justify="left")
    for col in ("b", "cache len") + names + ("step - attention", "vs FlashInfer"):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        cells = []
        for n in names:
            v = r.get(n, {})
            graph = f"{v['graph_ms'] * 1e3:.1f}" if "graph_ms" in v else "-"
            cells.append(f"{v['ms'] * 1e3:.1f} / {graph}" if "ms" in v else "-")
        step, alone, fi = (r.get(n, {}) for n in ("cukiln decode_step", "decode_attention alone",
                                                  "flashinfer three calls"))
        extra = f"{(step['ms'] - alone['ms']) * 1e3:.2f}" if "ms" in step and "ms" in alone else "-"
        speed = f"{fi['ms'] / step['ms']:.2f}x" if "ms" in step and "ms" in fi else "-"
        table.add_row(str(r["batch"]), str(r["cache_len"]), *cells, extra, speed)
    console.print(table)
    host = result["host_us_b1"]
    console.print("host us per eager step at b 1: " + ", ".join(f"{n} {v:.1f}" for n, v in host.items()))
