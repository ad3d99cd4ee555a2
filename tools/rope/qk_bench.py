"""`cukiln bench rope-qk` (GPU): q and k of a fused qkv projection rotated with positions and a packed cos|sin
cache, as serving stacks call RoPE once per layer per step: cukiln.rope_qk (in place and out of place) beside
FlashInfer (`apply_rope_with_cos_sin_cache(_inplace)`, `apply_rope_pos_ids(_inplace)`), Liger
(`liger_rotary_pos_emb`) and `torch.compile` of the plain formula, whichever import; and the transposed (b, h, s, d)
storage transformers hands over, read as (b, s, h, d); and M-RoPE on Qwen2-VL-7B's shapes beside Liger's
M-RoPE and `torch.compile` of transformers' formula.

Every contender's output is compared with the float64 reference before it is timed (its largest error relative to
the reference's largest magnitude is recorded; beyond 1e-2 it is flagged). Times: CUDA events, median, over
rotating input sets (bench conditions, tools/timing.py); bytes: q and k read and written once, plus each token's
cache row and position. Host time: µs per call at t = 1 (tools/overhead.per_call_us).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..timing import copy_tbps, median_ms, rotating_sets, run_metadata, tbps

# (tokens, q heads, k heads, head dim, interleaved pairing, cache dtype): the headline grid (GQA 32/8,
# NeoX, fp32 cache) and the MHA cases (head dims 64 and 256, interleaved, a bf16 cache).
HEADLINE = tuple((t, 32, 8, 128, False, "fp32") for t in (1, 16, 64, 256, 4096, 65536))
MHA = tuple((t, 32, 32, d, True, "bf16") for d in (64, 256) for t in (64, 65536))
MAX_POS = 131072
ERROR_LIMIT = 1e-2
TRANSPOSED = (1, 32, 8, 4096, 128)  # (b, q heads, k heads, s, d) stored as (b, h, s, d)


def _peers() -> dict:
    """The peer modules that import here, by name (FlashInfer is carried as a slim build: its submodules)."""
    found = {}
    try:
        import flashinfer.rope

        found["flashinfer"] = flashinfer.rope
    except Exception:  # not carried to this machine, or built for another torch
        pass
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb

        found["liger"] = liger_rotary_pos_emb
    except Exception:
        pass
    return found


def rotate_formula(q, k, cache, positions, interleaved: bool):
    """The plain formula torch users write (for torch.compile): rows of the packed cache gathered per token."""
    import torch

    rows = cache[positions].float()
    half = rows.shape[-1] // 2
    cos, sin = rows[:, None, :half], rows[:, None, half:]

    def rot(x):
        xf = x.float()
        if interleaved:
            a, b = xf[..., 0:2 * half:2], xf[..., 1:2 * half:2]
            y = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
        else:
            a, b = xf[..., :half], xf[..., half:2 * half]
            y = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
        return torch.cat((y, xf[..., 2 * half:]), dim=-1).to(x.dtype)

    return rot(q), rot(k)


def _cache(rd: int, dtype):
    import torch

    inv = 1.0 / (10000.0 ** (torch.arange(0, rd, 2, device="cuda", dtype=torch.float64) / rd))
    angles = torch.arange(MAX_POS, device="cuda", dtype=torch.float64)[:, None] * inv
    return torch.cat([angles.cos(), angles.sin()], dim=1).to(dtype)


def _error(got, ref) -> float:
    """Largest error relative to the reference's largest magnitude (NaN: infinite)."""
    import torch

    got = got.double()
    if torch.isnan(got).any():
        return float("inf")
    return ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def _contenders(case, peers: dict, compiled):
    """name -> (make(set) -> zero-argument call, check(set) -> (q_out, k_out) on a fresh set), for one case."""
    import torch

    import cukiln

    t, hq, hk, d, interleaved, cache_dtype = case
    cache = _cache(d, torch.float32 if cache_dtype == "fp32" else torch.bfloat16)
    fi_cache = cache.float()  # FlashInfer takes an fp32 cache only
    kw = dict(cos_sin_cache=cache, layout="thd", interleaved=interleaved)
    out = {
        "cukiln in place": (lambda s: lambda: cukiln.rope_qk(s["q"], s["k"], positions=s["pos"], inplace=True, **kw),
                            lambda s: cukiln.rope_qk(s["q"], s["k"], positions=s["pos"], inplace=True, **kw)),
        "cukiln": (lambda s: lambda: cukiln.rope_qk(s["q"], s["k"], positions=s["pos"], **kw),
                   lambda s: cukiln.rope_qk(s["q"], s["k"], positions=s["pos"], **kw)),
        "torch.compile": (lambda s: lambda: compiled(s["q"], s["k"], cache, s["pos"], interleaved),
                          lambda s: compiled(s["q"], s["k"], cache, s["pos"], interleaved)),
    }
    fi = peers.get("flashinfer")
    if fi is not None:
        def fi_inplace(s):
            fi.apply_rope_with_cos_sin_cache_inplace(s["pos"], s["q2"], s["k2"], d, fi_cache, not interleaved)
            return s["q"], s["k"]

        def fi_out(s):
            q, k = fi.apply_rope_with_cos_sin_cache(s["pos"], s["q2"], s["k2"], d, fi_cache, not interleaved)
            return q.view(t, hq, d), k.view(t, hk, d)

        def fi_pos_ids(s):
            return fi.apply_rope_pos_ids(s["q"], s["k"], s["pos"], rotary_dim=d, interleave=interleaved,
                                         rope_theta=10000.0)

        def fi_pos_ids_inplace(s):
            fi.apply_rope_pos_ids_inplace(s["q"], s["k"], s["pos"], rotary_dim=d, interleave=interleaved,
                                          rope_theta=10000.0)
            return s["q"], s["k"]

        out["flashinfer in place"] = (lambda s: lambda: fi_inplace(s), fi_inplace)
        out["flashinfer"] = (lambda s: lambda: fi_out(s), fi_out)
        out["flashinfer pos_ids"] = (lambda s: lambda: fi_pos_ids(s), fi_pos_ids)
        out["flashinfer pos_ids in place"] = (lambda s: lambda: fi_pos_ids_inplace(s), fi_pos_ids_inplace)
    liger = peers.get("liger")
    if liger is not None and not interleaved:  # Liger rotates halves (NeoX) only
        half = d // 2

        def liger_call(s):
            # HF's (b, h, s, d) views of (b, s, h, d) storage; cos/sin (1, t, d) gathered once per input set
            q, k = liger(s["q"][None].transpose(1, 2), s["k"][None].transpose(1, 2), s["cos"], s["sin"])
            return q.transpose(1, 2)[0], k.transpose(1, 2)[0]

        def liger_prepare(s):
            rows = fi_cache[s["pos"]]
            s["cos"] = rows[None, :, :half].repeat(1, 1, 2).contiguous()
            s["sin"] = rows[None, :, half:].repeat(1, 1, 2).contiguous()
            return s

        out["liger"] = (lambda s: (liger_prepare(s), lambda: liger_call(s))[1], lambda s: liger_call(liger_prepare(s)))
    return out


def _inputs(case):
    """One input set: a fused qkv buffer [t, (hq + 2 hk) d] with q and k views ([t, h, d] and FlashInfer's
    [t, h d]), int64 positions."""
    import torch

    t, hq, hk, d, _, _ = case
    qkv = torch.randn(t, (hq + 2 * hk) * d, device="cuda").to(torch.bfloat16)
    q2, k2 = qkv[:, : hq * d], qkv[:, hq * d:(hq + hk) * d]
    pos = torch.randint(0, MAX_POS, (t,), device="cuda", dtype=torch.int64)
    return {"qkv": qkv, "q": q2.view(t, hq, d), "k": k2.view(t, hk, d), "q2": q2, "k2": k2, "pos": pos}


def _bench_case(case, copy: float, peers: dict, compiled) -> dict:
    import torch

    import cukiln

    t, hq, hk, d, interleaved, cache_dtype = case
    elem = 2
    cache_bytes = 4 if cache_dtype == "fp32" else 2
    nbytes = 2 * t * (hq + hk) * d * elem + t * (d * cache_bytes + 8)
    row = {"tokens": t, "heads_q": hq, "heads_k": hk, "head_dim": d, "pairing": "interleaved" if interleaved else "half",
           "cache": cache_dtype, "bytes": nbytes}
    contenders = _contenders(case, peers, compiled)
    cache = _cache(d, torch.float32 if cache_dtype == "fp32" else torch.bfloat16)
    for name, (make, check) in contenders.items():
        s = _inputs(case)
        ref_q, ref_k = cukiln.reference.rope_qk(s["q"], s["k"], cos_sin_cache=cache, positions=s["pos"], layout="thd",
                                                interleaved=interleaved)
        try:
            got_q, got_k = check(s)
            err = max(_error(got_q, ref_q), _error(got_k, ref_k))
        except Exception as e:  # a peer that cannot take this case (head dim, dtype, ...)
            row[name] = {"skipped": f"{type(e).__name__}: {e}"[:200]}
            continue
        try:
            sets = rotating_sets(lambda: _inputs(case), 2 * t * (hq + 2 * hk) * d * elem)
            ms = median_ms([make(s) for s in sets])
        except Exception as e:
            row[name] = {"skipped": f"timing: {type(e).__name__}: {e}"[:200], "max_rel_err": err}
            continue
        rate = tbps(nbytes, ms)
        row[name] = {"ms": ms, "tbps": rate, "x_copy": rate / copy, "max_rel_err": err, "wrong": err > ERROR_LIMIT}
        del sets
    return row


def _host_times(peers: dict, compiled) -> dict:
    """µs per call at t = 1 (GQA 32/8, d 128), per contender, and torch's add_ beside them."""
    import torch

    from ..overhead import per_call_us

    case = HEADLINE[0]
    s = _inputs(case)
    calls = {name: make(s) for name, (make, _) in _contenders(case, peers, compiled).items()}
    y = torch.randn(1, device="cuda")
    calls["torch: y.add_(1.0)"] = lambda: y.add_(1.0)
    for fn in calls.values():
        per_call_us(fn, 300)
    rounds = {name: sorted(per_call_us(fn, 3000) for _ in range(5)) for name, fn in calls.items()}
    return {name: {"us_per_call": r[2], "rounds_us": r} for name, r in rounds.items()}


def _transposed(copy: float, peers: dict) -> dict:
    """q [b, hq, s, d] and k [b, hk, s, d] storage seen as (b, s, h, d) (transformers' apply_rotary_pos_emb
    inputs), rotated in place by cukiln.rope_qk beside torch.compile and Liger, with positions 0..s-1."""
    import torch

    import cukiln

    b, hq, hk, s, d = TRANSPOSED
    cache = _cache(d, torch.float32)

    def make():
        return (torch.randn(b, hq, s, d, device="cuda").to(torch.bfloat16),
                torch.randn(b, hk, s, d, device="cuda").to(torch.bfloat16))

    nbytes = 2 * b * s * (hq + hk) * d * 2 + s * d * 4
    positions = torch.arange(s, device="cuda")
    kw = dict(cos_sin_cache=cache, layout="bshd", positions=positions)
    compiled = torch.compile(lambda q, k: rotate_formula(q.transpose(1, 2)[0], k.transpose(1, 2)[0], cache,
                                                         positions, False), dynamic=False)
    q, k = make()
    ref = cukiln.reference.rope_qk(q.transpose(1, 2), k.transpose(1, 2), **kw)
    sets = rotating_sets(make, nbytes)
    row = {"shape": {"b": b, "heads_q": hq, "heads_k": hk, "s": s, "d": d, "storage": "bhsd", "read_as": "bshd"},
           "bytes": nbytes}
    contenders = {
        "cukiln in place": lambda q, k: cukiln.rope_qk(q.transpose(1, 2), k.transpose(1, 2), inplace=True, **kw),
        "torch.compile": compiled,
    }
    if "liger" in peers:
        rows = cache[:s]
        cos = rows[None, :, : d // 2].repeat(1, 1, 2).contiguous()
        sin = rows[None, :, d // 2:].repeat(1, 1, 2).contiguous()
        contenders["liger"] = lambda q, k: peers["liger"](q, k, cos, sin)
    for name, fn in contenders.items():
        qc, kc = q.clone(), k.clone()
        got = fn(qc, kc)
        got_q, got_k = (got[0].transpose(1, 2), got[1].transpose(1, 2)) if name == "liger" else \
            (qc.transpose(1, 2), kc.transpose(1, 2)) if name == "cukiln in place" else \
            (got[0][None], got[1][None])
        err = max(_error(got_q, ref[0]), _error(got_k, ref[1]))
        ms = median_ms([lambda s=st, fn=fn: fn(*s) for st in sets])
        rate = tbps(nbytes, ms)
        row[name] = {"ms": ms, "tbps": rate, "x_copy": rate / copy, "max_rel_err": err, "wrong": err > ERROR_LIMIT}
    return row


# M-RoPE: Qwen2-VL-7B's attention (28 q heads, 4 kv heads, d 128, sections (16, 24, 24), rope_theta 1e6) over
# t tokens of one sequence, q and k as its projections leave them ([b, s, h, d] storage).
MROPE = {"heads_q": 28, "heads_k": 4, "head_dim": 128, "sections": (16, 24, 24), "theta": 1e6,
         "tokens": (1024, 16384)}


def _peer_mrope():
    try:
        from liger_kernel.transformers.qwen2vl_mrope import liger_multimodal_rotary_pos_emb

        return liger_multimodal_rotary_pos_emb
    except Exception:  # not carried to this machine
        return None


def mrope_formula(q, k, cos, sin, sections):
    """transformers' Qwen2-VL M-RoPE (apply_multimodal_rotary_pos_emb) on q, k [b, h, s, d] with cos, sin
    [3, b, s, d]: each section's columns taken from its row of positions, then the rotate-half formula."""
    import torch

    split = list(sections) * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(split, dim=-1))], dim=-1).unsqueeze(1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(split, dim=-1))], dim=-1).unsqueeze(1)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _mrope_case(t: int, copy: float, compiled) -> dict:
    """q and k of t tokens rotated by M-RoPE: cukiln.rope_qk (positions [3, 1, t] and inv_freq, in place and out of
    place) beside Liger's M-RoPE (in place) and torch.compile of transformers' formula, both fed the cos and sin
    [3, 1, t, d] that Qwen2-VL's rotary module hands them (bf16). Each output is checked against the float64
    reference first."""
    import torch

    import cukiln

    hq, hk, d, sections = MROPE["heads_q"], MROPE["heads_k"], MROPE["head_dim"], MROPE["sections"]
    inv_freq = 1.0 / (MROPE["theta"] ** (torch.arange(0, d, 2, dtype=torch.float32, device="cuda") / d))

    def make():
        q = torch.randn(1, t, hq, d, device="cuda").to(torch.bfloat16)
        k = torch.randn(1, t, hk, d, device="cuda").to(torch.bfloat16)
        # a text prefix, then an image grid of 32-wide rows (time fixed; height and width apart)
        i = torch.arange(t, device="cuda")
        text = t // 4
        pos = torch.stack((torch.where(i < text, i, text), torch.where(i < text, i, text + (i - text) // 32),
                           torch.where(i < text, i, text + (i - text) % 32)))[:, None]  # [3, 1, t]
        angles = pos[..., None].float() * inv_freq  # Qwen2-VL's rotary module: fp32 angles, bf16 cos and sin
        emb = torch.cat((angles, angles), dim=-1)
        return {"q": q, "k": k, "pos": pos, "cos": emb.cos().to(torch.bfloat16), "sin": emb.sin().to(torch.bfloat16)}

    kw = dict(inv_freq=inv_freq, mrope_section=sections, layout="bshd")
    nbytes = 2 * t * (hq + hk) * d * 2 + 3 * t * 8
    contenders = {
        "cukiln in place": lambda s: cukiln.rope_qk(s["q"], s["k"], positions=s["pos"], inplace=True, **kw),
        "cukiln": lambda s: cukiln.rope_qk(s["q"], s["k"], positions=s["pos"], **kw),
        # transformers' (b, h, s, d) views of the projections' storage; results seen back as (b, s, h, d)
        "torch.compile": lambda s: tuple(o.transpose(1, 2) for o in compiled(
            s["q"].transpose(1, 2), s["k"].transpose(1, 2), s["cos"], s["sin"], sections)),
    }
    liger = _peer_mrope()
    if liger is not None:
        contenders["liger in place"] = lambda s: tuple(o.transpose(1, 2) for o in liger(
            s["q"].transpose(1, 2), s["k"].transpose(1, 2), s["cos"], s["sin"], list(sections)))
    row = {"tokens": t, "heads_q": hq, "heads_k": hk, "head_dim": d, "sections": list(sections), "bytes": nbytes,
           "liger": "timed" if liger is not None else "not importable here"}
    # The access bound at this size: a device copy of q's and k's bytes (what an in-place rotation reads and
    # writes), timed like the contenders; no kernel beats a peer by more than the peer's time over this one.
    elems = t * (hq + hk) * d
    copies = rotating_sets(lambda: (torch.empty(elems, device="cuda", dtype=torch.bfloat16),
                                    torch.randn(elems, device="cuda").to(torch.bfloat16)), 2 * elems * 2)
    row["copy_same_bytes"] = {"ms": median_ms([lambda c=c: c[0].copy_(c[1]) for c in copies])}
    del copies
    for name, call in contenders.items():
        s = make()
        ref_q, ref_k = cukiln.reference.rope_qk(s["q"], s["k"], positions=s["pos"], **kw)
        got_q, got_k = call(s)
        err = max(_error(got_q, ref_q), _error(got_k, ref_k))
        sets = rotating_sets(make, 2 * t * (hq + hk) * d * 2)
        ms = median_ms([lambda st=st: call(st) for st in sets])
        rate = tbps(nbytes, ms)
        row[name] = {"ms": ms, "tbps": rate, "x_copy": rate / copy, "max_rel_err": err, "wrong": err > ERROR_LIMIT,
                     "x_copy_same_bytes": row["copy_same_bytes"]["ms"] / ms}
        del sets
    if "liger in place" in row:
        row["most_any_kernel_gains_over_liger"] = row["liger in place"]["ms"] / row["copy_same_bytes"]["ms"]
    return row


def run(console: Console, args) -> dict:
    import torch

    torch._dynamo.config.cache_size_limit = 256
    torch._dynamo.config.recompile_limit = 256
    compiled = torch.compile(rotate_formula, dynamic=False)
    copy = copy_tbps()
    console.print(f"device-to-device copy: {copy:.3f} TB/s (read + write)")
    peers = _peers()
    console.print("peers: " + (", ".join(sorted(peers)) or "none importable (FlashInfer and Liger are timed when "
                                                                "they import)"))
    cases = list(HEADLINE + MHA)
    if args.quick:
        cases = cases[:2]
    mrope_tokens = MROPE["tokens"][:1] if args.quick else MROPE["tokens"]
    compiled_mrope = torch.compile(mrope_formula, dynamic=False)
    rows, mrope = [], []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("rope-qk cases", total=len(cases) + len(mrope_tokens) + 2)
        for case in cases:
            rows.append(_bench_case(case, copy, peers, compiled))
            progress.advance(task)
        for t in mrope_tokens:
            mrope.append(_mrope_case(t, copy, compiled_mrope))
            progress.advance(task)
        try:
            transposed = _transposed(copy, peers)
        except Exception as e:  # reported, and the rest of the bench still runs
            transposed = {"error": f"{type(e).__name__}: {e}"[:300]}
        progress.advance(task)
        host = _host_times(peers, compiled)
        progress.advance(task)
    names = sorted({n for r in rows for n, v in r.items() if isinstance(v, dict) and "ms" in v})
    return {**run_metadata("rope-qk", "cukiln bench rope-qk" + (" --quick" if args.quick else "")),
            "copy_tbps": copy, "peers": sorted(peers), "contenders": names, "cases": rows,
            "transposed": transposed, "mrope": mrope, "host_us": host}


def _speedup(row: dict, ours: str, theirs: str) -> str:
    if "ms" not in row.get(ours, {}) or "ms" not in row.get(theirs, {}):
        return "-"
    return f"{row[theirs]['ms'] / row[ours]['ms']:.2f}x"


def show(result: dict, console: Console) -> None:
    table = Table(title=f"rope-qk on {result['device']} — copy {result['copy_tbps']:.2f} TB/s; peers: "
                        f"{', '.join(result['peers']) or 'none'}", title_justify="left")
    for col in ("t", "heads", "d", "pairs", "cache", "cukiln in place us", "x copy", "vs FI in place",
                "cukiln us", "vs FI", "vs compile", "vs liger", "wrong"):
        table.add_column(col, justify="right")
    for r in result["cases"]:
        ours = r.get("cukiln in place", {})
        wrong = [n for n, v in r.items() if isinstance(v, dict) and v.get("wrong")]
        table.add_row(str(r["tokens"]), f"{r['heads_q']}/{r['heads_k']}", str(r["head_dim"]), r["pairing"], r["cache"],
                      f"{ours.get('ms', float('nan')) * 1e3:.2f}", f"{ours.get('x_copy', float('nan')):.3f}",
                      _speedup(r, "cukiln in place", "flashinfer in place"),
                      f"{r.get('cukiln', {}).get('ms', float('nan')) * 1e3:.2f}", _speedup(r, "cukiln", "flashinfer"),
                      _speedup(r, "cukiln", "torch.compile"), _speedup(r, "cukiln", "liger"),
                      ", ".join(wrong) or "")
    console.print(table)
    tr = result["transposed"]
    if "error" in tr:
        console.print(f"transposed case failed: {tr['error']}")
    console.print("transposed (b,h,s,d) read as (b,s,h,d), " + ", ".join(
        f"{n}: {v['ms'] * 1e3:.1f} us, {v['x_copy']:.3f}x copy" for n, v in tr.items() if isinstance(v, dict) and "ms" in v))
    for r in result.get("mrope", []):
        console.print(f"M-RoPE t {r['tokens']} {r['heads_q']}/{r['heads_k']} d{r['head_dim']} sections "
                      f"{tuple(r['sections'])}: " + ", ".join(
                          f"{n} {v['ms'] * 1e3:.1f} us ({v['x_copy']:.3f}x copy{', WRONG' if v['wrong'] else ''})"
                          for n, v in r.items() if isinstance(v, dict) and "x_copy" in v)
                      + f"; cukiln in place vs liger {_speedup(r, 'cukiln in place', 'liger in place')}, "
                        f"cukiln vs compile {_speedup(r, 'cukiln', 'torch.compile')}; a copy of the same bytes "
                        f"{r['copy_same_bytes']['ms'] * 1e3:.1f} us (at most "
                        f"{r.get('most_any_kernel_gains_over_liger', float('nan')):.2f}x over liger for any kernel)")
    host = result["host_us"]
    console.print("host us per call at t = 1: " + ", ".join(f"{n} {v['us_per_call']:.1f}" for n, v in host.items()))


def label(case: dict) -> str:
    return f"t{case['tokens']} {case['heads_q']}/{case['heads_k']} d{case['head_dim']} {case['pairing']}"
