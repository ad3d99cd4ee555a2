"""`cukiln bench decode` (GPU): cukiln, tuned and batch-invariant, against torch's scaled_dot_product_attention
(same cache slices, enable_gqa=True), FlashInfer where it imports (its batch decode on CUDA cores and on tensor cores
over a page-16 copy of the caches, and its single-request decode at b = 1: tools/flashinfer_peer.py) and any other
decode kernel installed, bf16, d = 128, h_q = 32, h_kv = 8, over batch x cache length. Bytes counted: K and V of
every row read once, plus q and the output. Every contender's output is compared with SDPA's before it is timed
(``max_abs_diff_vs_sdpa``).
"""

from __future__ import annotations

import itertools

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..timing import copy_tbps, failure, median_ms, rotating_sets, run_metadata, tbps

HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
BENCH_GRID = tuple(itertools.product((1, 8, 32, 128), (512, 2048, 8192, 32768))) + ((1, 131072),)
# The cache buffer holds this many more positions than the attended slice (a cache grown in steps).
CAPACITY_SLACK = 256
INVARIANT = "cukiln batch-invariant"
FLASHINFER = ("flashinfer", "flashinfer tc")  # its batch decode on CUDA cores, and on tensor cores
# Above this much K+V FlashInfer reads one page copy (call after call: far more than the L2 holds), not one per set.
ONE_COPY_BYTES = 256 * 2**20


def inputs(b: int, T: int):
    """q [b, h_q, d] and K/V slices [:, :, :T] of [b, h_kv, T + slack, d] buffers, bf16."""
    import torch

    q = torch.randn(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, HEADS_KV, T + CAPACITY_SLACK, HEAD_DIM, device="cuda", dtype=torch.bfloat16)[:, :, :T]
            for _ in range(2))
    return q, k, v


def torch_sdpa(q, k, v):
    """torch's scaled_dot_product_attention on the same q [b, h_q, d] and cache slices: [b, h_q, d]."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True)[:, :, 0]


def kv_bytes(b: int, T: int, itemsize: int = 2) -> int:
    return 2 * b * HEADS_KV * T * HEAD_DIM * itemsize


def moved_bytes(b: int, T: int, itemsize: int = 2) -> int:
    """What a decode step must move: K and V of every row once (``itemsize`` bytes an element), plus q and the
    output."""
    return kv_bytes(b, T, itemsize) + 2 * b * HEADS_Q * HEAD_DIM * 2


# --kv-dtype fp8_e4m3: the caches hold 16 x a unit normal draw in e4m3, dequantized by per-tensor scales
FP8_SCALE = 1 / 16


def as_fp8(*caches) -> tuple:
    """Each bf16 cache as an FP8 cache of scale FP8_SCALE, then the bf16 cache holding the same values (what a user
    without FP8 decode keeps or dequantizes to; exact: an e4m3 value times 2^-4 is a bf16 one): (k8, v8, ..., k16,
    v16, ...). The three benches of FP8 caches build their inputs with it."""
    import torch

    fp8 = tuple((c.float() / FP8_SCALE).to(torch.float8_e4m3fn) for c in caches)
    return fp8 + tuple((c.float() * FP8_SCALE).to(torch.bfloat16) for c in fp8)


def fp8_inputs(b: int, T: int):
    """q, FP8 K/V slices as inputs() lays them out, and the same values in bf16 (as_fp8)."""
    q, k, v = inputs(b, T)
    return (q, *as_fp8(k, v))


def _time_contenders(row: dict, contenders: dict, ref, nbytes: int, copy: float) -> None:
    """Each contender's first call compared with SDPA's output ``ref`` (a benchmark of a wrong kernel is worthless),
    then each timed into ``row``: ms, TB/s over ``nbytes`` and its ratio to the same-run ``copy``."""
    row["max_abs_diff_vs_sdpa"] = {name: (calls[0]().float().reshape(ref.shape) - ref).abs().max().item()
                                   for name, calls in contenders.items() if name != "torch_sdpa"}
    for name, calls in contenders.items():
        ms = median_ms(calls)
        rate = tbps(nbytes, ms)
        row[name] = {"ms": ms, "tbps": rate, "x_copy": rate / copy}
    row["speedup_vs_sdpa"] = row["torch_sdpa"]["ms"] / row["cukiln"]["ms"]


FLASHINFER_FP8 = ("flashinfer fp8", "flashinfer fp8 tc")  # its FP8 batch decode on CUDA cores, and on tensor cores


def _bench_fp8_case(b: int, T: int, copy: float, rotate: bool, missing: dict) -> dict:
    """One case of --kv-dtype fp8_e4m3: cukiln over the FP8 caches, cukiln over the same values in bf16, and torch's
    SDPA over those (bytes: the FP8 ones for each, so that x copy is the rate of an FP8 cache's read)."""
    import torch

    import cukiln

    nbytes = moved_bytes(b, T, itemsize=1)
    sets = rotating_sets(lambda: fp8_inputs(b, T), kv_bytes(b, T, 3)) if rotate else [fp8_inputs(b, T)]
    outs = [torch.empty(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in sets]
    contenders = {
        "cukiln": [lambda s=s, o=o: cukiln.decode_attention(s[0], s[1], s[2], T, out=o, k_scale=FP8_SCALE,
                                                            v_scale=FP8_SCALE) for s, o in zip(sets, outs)],
        "cukiln bf16": [lambda s=s, o=o: cukiln.decode_attention(s[0], s[3], s[4], T, out=o) for s, o in zip(sets, outs)],
        "torch_sdpa": [lambda s=s: torch_sdpa(s[0], s[3], s[4]) for s in sets],
    }
    for name, calls in _flashinfer(sets, b, T, fp8=True).items():
        if isinstance(calls, str):
            missing.setdefault(name, calls)
        else:
            contenders[name] = calls
    from cukiln.decode_api import plan_call

    plan = plan_call(*sets[0][:3], T, k_scale=FP8_SCALE, v_scale=FP8_SCALE)
    row = {"batch": b, "T": T, "kv_bytes": kv_bytes(b, T, 1), "bf16_kv_bytes": kv_bytes(b, T), "bytes": nbytes,
           "num_splits": plan.num_splits, "variant": plan.attention.symbol}
    ref = torch_sdpa(sets[0][0], sets[0][3], sets[0][4]).float()
    _time_contenders(row, contenders, ref, nbytes, copy)
    row["speedup_vs_bf16"] = row["cukiln bf16"]["ms"] / row["cukiln"]["ms"]
    for name in FLASHINFER_FP8:
        if name in row:
            row[f"speedup_vs_{name}"] = row[name]["ms"] / row["cukiln"]["ms"]
    del sets, outs, contenders
    torch.cuda.empty_cache()
    return row


PAGE_SIZES = (1, 16, 64)  # --paged: serving engines' token-granular pool, vLLM's default, a large page


def _bench_paged_case(b: int, T: int, page_sizes, copy: float, rotate: bool, missing: dict, fp8: bool = False) -> dict:
    """One case of --paged: cukiln's fixed-capacity decode (the reference point), then per page size cukiln's paged
    decode and FlashInfer's paged batch decode (CUDA cores and tensor cores) over one NHD pool of the same keys in
    shuffled page order; each output compared with SDPA's (over the bf16 caches of the same values) before it is timed.
    ``fp8``: the caches in FP8 (as_fp8, scale FP8_SCALE), bytes counted as FP8."""
    import torch

    import cukiln

    from .. import flashinfer_peer
    from .checks import paged_copy

    nbytes = moved_bytes(b, T, itemsize=1 if fp8 else 2)
    make = (lambda: fp8_inputs(b, T)[:3]) if fp8 else (lambda: inputs(b, T))
    sets = rotating_sets(make, kv_bytes(b, T, 1 if fp8 else 2)) if rotate else [make()]
    outs = [torch.empty(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in sets]
    scales = {"k_scale": FP8_SCALE, "v_scale": FP8_SCALE} if fp8 else {}
    widened = (lambda c: (c.float() * FP8_SCALE).to(torch.bfloat16)) if fp8 else (lambda c: c)
    ref = torch_sdpa(sets[0][0], widened(sets[0][1]), widened(sets[0][2])).float()
    row = {"batch": b, "T": T, "kv_bytes": kv_bytes(b, T, 1 if fp8 else 2), "bytes": nbytes}

    def timed(calls) -> dict:
        ms = median_ms(calls)
        return {"ms": ms, "tbps": tbps(nbytes, ms), "x_copy": tbps(nbytes, ms) / copy,
                "max_abs_diff_vs_sdpa": (calls[0]().float().reshape(ref.shape) - ref).abs().max().item()}

    row["cukiln fixed"] = timed([lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o, **scales)
                                 for s, o in zip(sets, outs)])
    gen = torch.Generator("cuda").manual_seed(b * T)
    for page in page_sizes:
        pools = [paged_copy(s[1:], page, pool_layout="bshd", gen=gen, spare=0) for s in sets]
        from cukiln.decode_api import plan_call

        plan = plan_call(sets[0][0], *pools[0][0], T, kv_layout="bshd", block_table=pools[0][1], **scales)
        entry = {"num_splits": plan.num_splits, "variant": plan.attention.symbol,
                 "cukiln": timed([lambda s=s, p=p, o=o: cukiln.decode_attention(s[0], *p[0], T, kv_layout="bshd",
                                                                               block_table=p[1], out=o, **scales)
                                  for s, p, o in zip(sets, pools, outs)])}
        for name, tensor_cores in zip(FLASHINFER_FP8 if fp8 else FLASHINFER, (False, True)):
            try:
                wrappers = [flashinfer_peer.batch_decode(p[1], T, HEADS_Q, HEADS_KV, HEAD_DIM, torch.bfloat16,
                                                         tensor_cores=tensor_cores, page=page,
                                                         kv_dtype=torch.float8_e4m3fn if fp8 else None) for p in pools]
                entry[name] = timed([lambda s=s, p=p, w=w: w.run(s[0], tuple(p[0]), **scales)
                                     for s, p, w in zip(sets, pools, wrappers)])
                entry[f"speedup_vs_{name}"] = entry[name]["ms"] / entry["cukiln"]["ms"]
            except Exception as e:  # FlashInfer does not import here, or its module does not build
                missing.setdefault(name, failure(e))
        entry["vs_fixed"] = row["cukiln fixed"]["ms"] / entry["cukiln"]["ms"]
        row[f"page {page}"] = entry
        del pools
        torch.cuda.empty_cache()
    del sets, outs
    torch.cuda.empty_cache()
    return row


def causal_sdpa(q, k, v):
    """torch's scaled_dot_product_attention of n query tokens a row, q [b, n, h_q, d], over the cache slices [b, h_kv,
    T, d] whose last n keys are theirs, causal among them (token j attends to keys [0, T - n + j + 1)): [b, n, h_q,
    d]."""
    import torch
    import torch.nn.functional as F

    n, T = q.shape[1], k.shape[2]
    mask = torch.arange(T, device=q.device)[None, :] < torch.arange(T - n + 1, T + 1, device=q.device)[:, None]
    return F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=mask, enable_gqa=True).transpose(1, 2)


Q_LENS = (1, 2, 4, 8)  # --q-len: a plain decode step, then speculative verification's usual draft lengths


def _bench_q_len_case(b: int, T: int, q_lens, copy: float, rotate: bool, missing: dict) -> dict:
    """One case of --q-len: per query length n, cukiln's decode of n tokens a row (the cache's last n keys theirs,
    causal among them) beside torch's SDPA with a causal mask and FlashInfer's batch prefill (causal, over a page-16
    copy), its tensor-core batch decode (n tokens a row: its ``q_len_per_req``) and at n = 1 its CUDA-core decode too;
    each output compared with SDPA's before it is timed; ``vs_q_len_1``: cukiln's time at n over its own at 1 on the
    same caches (the keys read once whatever n)."""
    import torch

    import cukiln

    from .. import flashinfer_peer

    sets = rotating_sets(lambda: inputs(b, T), kv_bytes(b, T)) if rotate else [inputs(b, T)]
    try:
        used = sets if kv_bytes(b, T) < ONE_COPY_BYTES else sets[:1]
        copies = [flashinfer_peer.paged_copy(s[1], s[2]) for s in used]
    except Exception as e:  # FlashInfer does not import here, or the copies do not fit
        copies, used = None, []
        missing.setdefault("flashinfer prefill", failure(e))
    row = {"batch": b, "T": T, "kv_bytes": kv_bytes(b, T)}
    for n in q_lens:
        qs = [torch.randn(b, n, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in sets]
        outs = [torch.empty_like(q) for q in qs]
        nbytes = kv_bytes(b, T) + 2 * qs[0].numel() * qs[0].element_size()
        contenders = {
            "cukiln": [lambda q=q, s=s, o=o: cukiln.decode_attention(q, s[1], s[2], T, out=o)
                       for q, s, o in zip(qs, sets, outs)],
            "torch_sdpa": [lambda q=q, s=s: causal_sdpa(q, s[1], s[2]) for q, s in zip(qs, sets)],
        }
        if copies is not None:
            try:
                wrapper = flashinfer_peer.batch_prefill(copies[0][2], T, n, HEADS_Q, HEADS_KV, HEAD_DIM, torch.bfloat16)
                contenders["flashinfer prefill"] = [lambda q=q, c=c, w=wrapper: w.run(q.flatten(0, 1), c[:2])
                                                    for q, c in zip(qs, copies)]
            except Exception as e:  # its module does not build here
                missing.setdefault("flashinfer prefill", failure(e))
            if n > 1:
                try:
                    wrapper = flashinfer_peer.batch_decode(copies[0][2], T, HEADS_Q, HEADS_KV, HEAD_DIM, torch.bfloat16,
                                                           tensor_cores=True, queries=n)
                    contenders["flashinfer tc"] = [lambda q=q, c=c, w=wrapper: w.run(q.flatten(0, 1), c[:2])
                                                   for q, c in zip(qs, copies)]
                except Exception as e:  # its module does not build here, or takes no q_len_per_req
                    missing.setdefault(f"flashinfer tc (q_len {n})", failure(e))
        if n == 1:
            for name, calls in _flashinfer([(q[:, 0], *s[1:]) for q, s in zip(qs, sets)], b, T).items():
                if isinstance(calls, str):
                    missing.setdefault(name, calls)
                elif name in FLASHINFER:
                    contenders[name] = calls
        from cukiln.decode_api import plan_call

        plan = plan_call(qs[0], *sets[0][1:], T)
        entry = {"bytes": nbytes, "num_splits": plan.num_splits, "variant": plan.attention.symbol}
        _time_contenders(entry, contenders, causal_sdpa(qs[0], *sets[0][1:]).float(), nbytes, copy)
        for name in contenders:
            if name.startswith("flashinfer"):
                entry[f"speedup_vs_{name}"] = entry[name]["ms"] / entry["cukiln"]["ms"]
        if "q_len 1" in row:
            entry["vs_q_len_1"] = entry["cukiln"]["ms"] / row["q_len 1"]["cukiln"]["ms"]
        row[f"q_len {n}"] = entry
        del qs, outs, contenders
    del sets, copies, used
    torch.cuda.empty_cache()
    return row


def _other_kernels() -> dict:
    """Decode kernels besides torch's and FlashInfer's that are installed here: name -> fn(q, k, v, T) -> output."""
    found = {}
    try:
        from flash_attn import flash_attn_with_kvcache  # bshd caches only: timed on transposed views

        found["flash_attn"] = lambda q, k, v, T: flash_attn_with_kvcache(
            q.unsqueeze(1), k.transpose(1, 2), v.transpose(1, 2), cache_seqlens=T)
    except Exception:  # not installed, or built for another torch
        pass
    return found


def _flashinfer(sets, b: int, T: int, fp8: bool = False) -> dict:
    """FlashInfer's contenders on page-16 copies of the input sets' caches (s[1], s[2]; one copy where K+V are far
    larger than the L2, so that the copies fit beside cukiln's): its batch decode on CUDA cores and on tensor cores
    (the prefill kernels), and at b = 1 its single-request decode; ``fp8``: over the FP8 caches, with their scales, the
    batch decodes alone. Name -> calls, or the reason it is missing (a string)."""
    import torch

    from .. import flashinfer_peer

    names = FLASHINFER_FP8 if fp8 else FLASHINFER
    single = b == 1 and not fp8
    try:
        used = sets if kv_bytes(b, T, 1 if fp8 else 2) < ONE_COPY_BYTES else sets[:1]
        copies = [flashinfer_peer.paged_copy(s[1], s[2]) for s in used]
    except Exception as e:  # FlashInfer does not import here, or the copies do not fit
        return {name: failure(e) for name in names + (("flashinfer single",) if single else ())}
    scales = {"k_scale": FP8_SCALE, "v_scale": FP8_SCALE} if fp8 else {}
    found = {}
    for name, tensor_cores in zip(names, (False, True)):
        try:
            wrapper = flashinfer_peer.batch_decode(copies[0][2], T, HEADS_Q, HEADS_KV, HEAD_DIM, torch.bfloat16,
                                                   tensor_cores=tensor_cores,
                                                   kv_dtype=torch.float8_e4m3fn if fp8 else None)
            found[name] = [lambda q=s[0], c=c, w=wrapper: w.run(q, c[:2], **scales) for s, c in zip(used, copies)]
        except Exception as e:  # its module does not build, or takes no such caches here
            found[name] = failure(e)
    if single:
        try:
            found["flashinfer single"] = [flashinfer_peer.single_decode(q[0], k[0], v[0]) for q, k, v in used]
        except Exception as e:
            found["flashinfer single"] = failure(e)
    return found


def _bench_case(b: int, T: int, copy: float, others: dict, rotate: bool, missing: dict) -> dict:
    import torch

    import cukiln

    nbytes = moved_bytes(b, T)
    sets = rotating_sets(lambda: inputs(b, T), kv_bytes(b, T)) if rotate else [inputs(b, T)]
    outs = [torch.empty(b, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in sets]
    contenders = {
        "cukiln": [lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o) for s, o in zip(sets, outs)],
        INVARIANT: [lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o, batch_invariant=True)
                    for s, o in zip(sets, outs)],
        "torch_sdpa": [lambda s=s: torch_sdpa(*s) for s in sets],
    }
    for name, calls in _flashinfer(sets, b, T).items():
        if isinstance(calls, str):
            missing.setdefault(name, calls)
        else:
            contenders[name] = calls
    for name, fn in others.items():
        contenders[name] = [lambda s=s, fn=fn: fn(*s, T) for s in sets]
    from cukiln.decode_api import plan_call

    plan = plan_call(*sets[0], T)
    row = {"batch": b, "T": T, "kv_bytes": kv_bytes(b, T), "bytes": nbytes, "num_splits": plan.num_splits,
           "variant": plan.attention.symbol,
           "invariant_splits": plan_call(*sets[0], T, batch_invariant=True).num_splits}
    ref = torch_sdpa(*sets[0]).float()
    _time_contenders(row, contenders, ref, nbytes, copy)
    row["invariant_vs_tuned"] = row["cukiln"]["ms"] / row[INVARIANT]["ms"]
    for name in contenders:
        if name.startswith("flashinfer"):
            row[f"speedup_vs_{name}"] = row[name]["ms"] / row["cukiln"]["ms"]
    del sets, outs, contenders
    torch.cuda.empty_cache()
    return row


def run(console: Console, args) -> dict:
    """Every case of BENCH_GRID (the first three with ``args.quick``); ``args.no_rotate`` times each call on one
    input set, so that K/V which fit in L2 are served from it."""
    quick, rotate, fp8 = args.quick, not args.no_rotate, getattr(args, "kv_dtype", None) == "fp8_e4m3"
    page_sizes = getattr(args, "paged", None)
    q_lens = getattr(args, "q_len", None)
    if q_lens and (page_sizes or fp8):
        raise ValueError("--q-len times bf16 caches of fixed capacity: give it without --paged and --kv-dtype")
    copy = copy_tbps()
    console.print(f"device-to-device copy: {copy:.3f} TB/s (read + write)")
    others = {} if fp8 else _other_kernels()
    grid = BENCH_GRID[:3] if quick else BENCH_GRID
    rows, missing = [], {}
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("decode cases", total=len(grid))
        for b, T in grid:
            rows.append(_bench_q_len_case(b, T, q_lens, copy, rotate, missing) if q_lens else
                        _bench_paged_case(b, T, page_sizes, copy, rotate, missing, fp8) if page_sizes else
                        _bench_fp8_case(b, T, copy, rotate, missing) if fp8 else
                        _bench_case(b, T, copy, others, rotate, missing))
            progress.advance(task)
    for name, why in missing.items():
        console.print(f"[yellow]{name}: not timed ({why})[/]")
    command = ("cukiln bench decode" + (" --quick" if quick else "") + ("" if rotate else " --no-rotate")
               + (" --kv-dtype fp8_e4m3" if fp8 else "")
               + (f" --paged {','.join(map(str, page_sizes))}" if page_sizes else "")
               + (f" --q-len {','.join(map(str, q_lens))}" if q_lens else ""))
    if q_lens:
        return {**run_metadata("decode", command), "copy_tbps": copy, "rotating_buffers": rotate, "no_plot": True,
                "shape": {"heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "dtype": "bf16",
                          "kv_dtype": "bf16", "capacity": f"T + {CAPACITY_SLACK}",
                          "queries": "the cache's last n keys, causal among them"},
                "q_lens": list(q_lens), "peers": ["flashinfer prefill", *FLASHINFER],
                "peers_missing": missing, "cases": rows}
    if page_sizes:
        return {**run_metadata("decode", command), "copy_tbps": copy, "rotating_buffers": rotate, "no_plot": True,
                "shape": {"heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "dtype": "bf16",
                          "kv_dtype": "fp8_e4m3" if fp8 else "bf16", "pool": "NHD, pages in shuffled order"},
                "page_sizes": list(page_sizes),
                "peers": [n for n in (FLASHINFER_FP8 if fp8 else FLASHINFER) if n not in missing],
                "peers_missing": missing, "cases": rows}
    return {**run_metadata("decode", command), "copy_tbps": copy, "rotating_buffers": rotate,
            "shape": {"heads_q": HEADS_Q, "heads_kv": HEADS_KV, "head_dim": HEAD_DIM, "dtype": "bf16",
                      "kv_dtype": "fp8_e4m3" if fp8 else "bf16", "capacity": f"T + {CAPACITY_SLACK}"},
            "others": sorted(others),
            "peers": [n for n in ((*FLASHINFER, "flashinfer single") if not fp8 else FLASHINFER_FP8)
                      if n not in missing],
            "peers_missing": missing, "cases": rows}


def show(result: dict, console: Console) -> None:
    inputs = "rotating input sets" if result.get("rotating_buffers", True) else "one input set (L2 warm)"
    peers = result.get("peers", [])
    table = Table(title=f"decode attention on {result['device']} — copy {result['copy_tbps']:.2f} TB/s, {inputs}; "
                        "vs X: X's time / cukiln's", title_justify="left")
    if result.get("page_sizes"):
        _show_paged(result, console, inputs)
        return
    if result.get("q_lens"):
        _show_q_len(result, console, inputs)
        return
    if result.get("shape", {}).get("kv_dtype") == "fp8_e4m3":
        _show_fp8(result, console, inputs)
        return
    for col in ("b", "T", "K+V MB", "splits", "cukiln us", "x copy", "sdpa us", "sdpa x copy", "vs sdpa",
                "invariant vs tuned", *(f"vs {p}" for p in peers), *result["others"]):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        c = r["cukiln"]["x_copy"]
        ok = (c >= 0.90 or r["kv_bytes"] < 256e6) and r["speedup_vs_sdpa"] >= 0.97
        inv = r.get("invariant_vs_tuned")
        table.add_row(str(r["batch"]), str(r["T"]), f"{r['kv_bytes'] / 1e6:.0f}", str(r["num_splits"]),
                      f"{r['cukiln']['ms'] * 1e3:.1f}", f"[{'green' if ok else 'red'}]{c:.3f}[/]",
                      f"{r['torch_sdpa']['ms'] * 1e3:.1f}", f"{r['torch_sdpa']['x_copy']:.3f}",
                      f"{r['speedup_vs_sdpa']:.2f}x", "-" if inv is None else f"{inv:.2f}x",
                      *(f"{r[f'speedup_vs_{p}']:.2f}x" if f"speedup_vs_{p}" in r else "-" for p in peers),
                      *(f"{r[o]['ms'] * 1e3:.1f}" for o in result["others"]))
    console.print(table)


def _show_fp8(result: dict, console: Console, inputs: str) -> None:
    table = Table(title=f"decode over FP8 caches on {result['device']} — copy {result['copy_tbps']:.2f} TB/s, {inputs}; "
                        "x copy of the FP8 bytes; vs X: X's time / cukiln FP8's", title_justify="left")
    for col in ("b", "T", "K+V MB (fp8)", "splits", "fp8 us", "x copy", "bf16 us", "vs bf16", "sdpa us", "vs sdpa",
                *(f"vs {name}" for name in FLASHINFER_FP8)):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        table.add_row(str(r["batch"]), str(r["T"]), f"{r['kv_bytes'] / 1e6:.0f}", str(r["num_splits"]),
                      f"{r['cukiln']['ms'] * 1e3:.1f}", f"{r['cukiln']['x_copy']:.3f}",
                      f"{r['cukiln bf16']['ms'] * 1e3:.1f}", f"{r['speedup_vs_bf16']:.2f}x",
                      f"{r['torch_sdpa']['ms'] * 1e3:.1f}", f"{r['speedup_vs_sdpa']:.2f}x",
                      *(f"{r[f'speedup_vs_{n}']:.2f}x" if f"speedup_vs_{n}" in r else "-" for n in FLASHINFER_FP8))
    console.print(table)


def _show_paged(result: dict, console: Console, inputs: str) -> None:
    peers = result.get("peers", [])
    kv = result.get("shape", {}).get("kv_dtype", "bf16")
    table = Table(title=f"paged decode over {kv} caches on {result['device']} — copy {result['copy_tbps']:.2f} TB/s, "
                        f"{inputs}; vs X: X's time / cukiln paged's", title_justify="left")
    for col in ("b", "T", "K+V MB", "page", "splits", "paged us", "x copy", "vs fixed", *(f"vs {p}" for p in peers),
                *(f"{p} x copy" for p in peers)):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        for page in result["page_sizes"]:
            e = r[f"page {page}"]
            table.add_row(str(r["batch"]), str(r["T"]), f"{r['kv_bytes'] / 1e6:.0f}", str(page), str(e["num_splits"]),
                          f"{e['cukiln']['ms'] * 1e3:.1f}", f"{e['cukiln']['x_copy']:.3f}", f"{e['vs_fixed']:.3f}",
                          *(f"{e[f'speedup_vs_{p}']:.2f}x" if f"speedup_vs_{p}" in e else "-" for p in peers),
                          *(f"{e[p]['x_copy']:.3f}" if p in e else "-" for p in peers))
    console.print(table)


def _show_q_len(result: dict, console: Console, inputs: str) -> None:
    peers = [p for p in result["peers"] if p not in result["peers_missing"]]
    table = Table(title=f"decode of n query tokens a row on {result['device']} — copy {result['copy_tbps']:.2f} TB/s, "
                        f"{inputs}; vs X: X's time / cukiln's; vs n = 1: cukiln's time / its own at n = 1",
                  title_justify="left")
    for col in ("b", "T", "K+V MB", "n", "splits", "cukiln us", "x copy", "vs n = 1", "vs sdpa",
                *(f"vs {p}" for p in peers)):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        for n in result["q_lens"]:
            e = r[f"q_len {n}"]
            table.add_row(str(r["batch"]), str(r["T"]), f"{r['kv_bytes'] / 1e6:.0f}", str(n), str(e["num_splits"]),
                          f"{e['cukiln']['ms'] * 1e3:.1f}", f"{e['cukiln']['x_copy']:.3f}",
                          f"{e['vs_q_len_1']:.3f}" if "vs_q_len_1" in e else "-", f"{e['speedup_vs_sdpa']:.2f}x",
                          *(f"{e[f'speedup_vs_{p}']:.2f}x" if f"speedup_vs_{p}" in e else "-" for p in peers))
    console.print(table)
