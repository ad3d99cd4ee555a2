"""`cukiln bench decode-step` (GPU): one decode step of an attention layer (rotate the new query and key, write the
new key and value into the cache at each row's length, attend), d 128, bf16, NeoX pairing, an fp32 cos|sin cache,
in three case sets (SETS), each with the contenders that apply to it (CONTENDERS):

- GQA 32/8 over batch {1, 8, 32, 128} x cache length {2k, 8k, 32k} (the result's ``cases``);
- GQA 64/8, the heads FlashInfer's fused kernel takes, over the same batches at cache length 8k (``cases_gqa64``);
- GQA 64/8 with a per-head RMSNorm of q and k before RoPE (``cases_qk_norm``), batches as above.

With the environment variable CUKILN_DECODE_STEP_FULL_GRID=1 (and no --quick) the two 64/8 sets run the whole
32/8 grid too. ``--kv-dtype fp8_e4m3`` runs one set instead (``cases_fp8``): GQA 32/8 over FP8 (e4m3) caches with a
scale per KV head, cukiln's step and its attention alone beside cukiln's step over bf16 caches of the same values
(bytes counted as FP8).

The contenders: cukiln.decode_step (with the norm weights where the set has them); cukiln's separate calls
(rope_qk, a torch index write, decode_attention; no norm); FlashInfer's three calls on a page-16 cache
(`apply_rope_with_cos_sin_cache_inplace`, `append_paged_kv_cache`, the batch decode wrapper; no norm); FlashInfer's
fused `cake_fused_qk_rmsnorm_rope_append_paged_kv_cache` (norm policy 2, norm then RoPE, where the set has a norm;
heads 64/8 or 8/1 only) followed by the same batch decode; torch (RMSNorm in fp32 where the set has it, the rotation
formula, index writes, SDPA over the cache slice); and decode_attention alone (the bar the fused step is held to).
Paged caches (the 32/8 set): cukiln's step over the same page-16 pools through their block table, its paged attention
alone (that step's bar), and the appends alone, cukiln's kv_append (which rotates q and k too) beside FlashInfer's
`append_paged_kv_cache`.
Both FlashInfer contenders read one page-16 NHD copy of the caches (K and V pages apart) and one decode wrapper,
planned outside the timed call; FlashInfer's are skipped, with the reason recorded, where it does not import.

GPU time per step (CUDA events, bench conditions, one input set: caches of up to about 40 MB, b 1 at 2k and 8k, fit
in an H100's L2 and are served from it, alike for every contender) eager and replayed from a CUDA graph; host time
per eager step at b 1 beside torch's add_. Each step's attention output (every contender but decode_attention
alone) is checked against cukiln's float64 reference at one small point of its set before anything is timed; one
whose error is over ERROR_LIMIT, or that failed there, is flagged ``wrong``.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..decode.bench import FP8_SCALE, as_fp8
from ..flashinfer_peer import PAGE
from ..timing import copy_tbps, failure, median_ms, run_metadata, tbps

HEAD_DIM = 128
BATCHES, CACHE_LENS = (1, 8, 32, 128), (2048, 8192, 32768)
GRID = tuple(itertools.product(BATCHES, CACHE_LENS))
AT_8K = tuple((b, 8192) for b in BATCHES)
SLACK = 256  # cache slots beyond the current length (rounded up to whole pages)
NORM_EPS = 1e-6
FUSED_HEADS = ((8, 1), (64, 8))  # the head configurations FlashInfer's fused kernel supports
CHECK_POINT = (4, 300)  # b, cache length of the accuracy check
HOST_POINT = (1, 2048)  # b, cache length of the host-time figures
ERROR_LIMIT = 2e-2
BAR = "decode_attention alone"  # the attention of the step without its append: not a step, so not checked as one
PAGED_BAR = "paged decode_attention alone"  # the same over the page-16 pools: the bar of the paged step
# the appends alone over the page-16 pools (cukiln's rotates q and k too; FlashInfer's writes k and v as given)
APPENDS = ("cukiln paged kv_append", "flashinfer append_paged_kv_cache")
UNCHECKED = (BAR, PAGED_BAR, *APPENDS)  # not a whole step: not checked against the step's reference
# the attention followed by torch's smallest kernel (a 1-element add_): what any second kernel in the step costs
SECOND_KERNEL = "attention + a 1-element add_"
FULL_GRID_ENV = "CUKILN_DECODE_STEP_FULL_GRID"


@dataclass(frozen=True)
class CaseSet:
    """One set of cases: its keys in the result are ``cases``, ``shape``, ``max_rel_err`` and ``host_us_b1``, each
    followed by ``suffix``; ``grid`` and ``quick`` are its (batch, cache length) points in a run and in --quick."""

    suffix: str
    title: str
    heads_q: int
    heads_kv: int
    norm: bool
    grid: tuple
    quick: tuple
    fp8: bool = False  # FP8 (e4m3) caches with a scale per KV head


FP8_SET = CaseSet("_fp8", "GQA 32/8, d 128, bf16 q, FP8 (e4m3) caches", 32, 8, False, GRID,
                  ((1, 2048), (8, 8192), (128, 32768)), fp8=True)


SETS = (
    CaseSet("", "GQA 32/8, d 128, bf16", 32, 8, False, GRID, ((1, 2048), (8, 8192), (128, 32768))),
    CaseSet("_gqa64", "GQA 64/8, d 128, bf16", 64, 8, False, AT_8K, ((1, 8192),)),
    CaseSet("_qk_norm", "GQA 64/8, d 128, bf16, RMSNorm of q and k before RoPE", 64, 8, True, AT_8K, ((1, 8192),)),
)


def step_bytes(b: int, L: int, heads_q: int, heads_kv: int, cache_itemsize: int = 2) -> int:
    """What a step must move: the L + 1 keys and values of every row read once (``cache_itemsize`` bytes each), the
    new q, k and v read and the rotated q and the new key and value written."""
    return 2 * b * heads_kv * (L + 1) * HEAD_DIM * cache_itemsize + 2 * b * (heads_q + 2 * heads_kv) * HEAD_DIM * 2


def setup_case(cs: CaseSet, b: int, L: int) -> dict:
    """Caches [b, h_kv, capacity, d] of capacity L + SLACK holding L tokens a row, a fused projection's q, k, v for
    the new token (views of one packed [b, (h_q + 2 h_kv) d] tensor), and the set's norm weights (fp32 [d])."""
    import torch

    T = -(-(L + SLACK) // PAGE) * PAGE  # whole pages, so that FlashInfer's copy holds the same slots
    hq, hkv = cs.heads_q, cs.heads_kv
    bf16 = torch.bfloat16
    s = {"b": b, "L": L, "T": T, "hq": hq, "hkv": hkv}
    s["k_cache"] = torch.empty(b, hkv, T, HEAD_DIM, device="cuda", dtype=bf16).normal_()
    s["v_cache"] = torch.empty(b, hkv, T, HEAD_DIM, device="cuda", dtype=bf16).normal_()
    s["qkv"] = qkv = torch.randn(b, (hq + 2 * hkv) * HEAD_DIM, device="cuda").to(bf16)
    s["q2"], s["k2"] = qkv[:, : hq * HEAD_DIM], qkv[:, hq * HEAD_DIM:(hq + hkv) * HEAD_DIM]
    s["q"], s["k"] = s["q2"].view(b, hq, HEAD_DIM), s["k2"].view(b, hkv, HEAD_DIM)
    s["v"] = qkv[:, (hq + hkv) * HEAD_DIM:].view(b, hkv, HEAD_DIM)
    s["lens"] = torch.full((b,), L, dtype=torch.int32, device="cuda")
    s["lens_after"] = s["lens"] + 1
    s["pos"] = s["lens"].long()
    s["rows"] = torch.arange(b, device="cuda")
    inv = 1.0 / (1e4 ** (torch.arange(0, HEAD_DIM, 2, device="cuda", dtype=torch.float64) / HEAD_DIM))
    angles = torch.arange(T, device="cuda", dtype=torch.float64)[:, None] * inv
    s["cos_sin"] = torch.cat((angles.cos(), angles.sin()), dim=1).float()
    s["out"] = torch.empty(b, hq, HEAD_DIM, device="cuda", dtype=bf16)
    s["norm_kw"] = {}  # cukiln's (and its reference's) norm and scale arguments
    if cs.fp8:  # FP8 caches, and bf16 ones holding the same values (decode's bench makes them alike)
        s["k_cache"], s["v_cache"], s["k_cache16"], s["v_cache16"] = as_fp8(s["k_cache"], s["v_cache"])
        s["norm_kw"] = {"k_scale": torch.full((hkv,), FP8_SCALE, device="cuda"), "v_scale": FP8_SCALE}
    if cs.norm:
        s["q_norm"], s["k_norm"] = (1.0 + 0.25 * torch.randn(HEAD_DIM, device="cuda") for _ in range(2))
        s["norm_kw"] = {"q_norm_weight": s["q_norm"], "k_norm_weight": s["k_norm"], "norm_eps": NORM_EPS}
    return s


# --- the contenders: each builder takes the inputs of one point and returns its zero-argument step ---------------

def _attention_alone(s):
    import cukiln

    scales = {n: s["norm_kw"][n] for n in ("k_scale", "v_scale") if n in s["norm_kw"]}
    return lambda: cukiln.decode_attention(s["q"], s["k_cache"], s["v_cache"], s["lens_after"], out=s["out"], **scales)


def _attention_and_a_small_kernel(s):
    import torch

    import cukiln

    y = torch.zeros(1, device="cuda")

    def step():
        y.add_(1.0)
        return cukiln.decode_attention(s["q"], s["k_cache"], s["v_cache"], s["lens_after"], out=s["out"])

    return step


def _cukiln_step(s):
    import cukiln

    return lambda: cukiln.decode_step(s["q"], s["k"], s["v"], s["k_cache"], s["v_cache"], s["lens"],
                                      cos_sin_cache=s["cos_sin"], out=s["out"], **s["norm_kw"])


def _cukiln_step_bf16(s):
    """cukiln's step over the bf16 caches holding the FP8 set's values: what the FP8 caches are held to."""
    import cukiln

    return lambda: cukiln.decode_step(s["q"], s["k"], s["v"], s["k_cache16"], s["v_cache16"], s["lens"],
                                      cos_sin_cache=s["cos_sin"], out=s["out"])


def _cukiln_separate(s):
    """rope_qk in place, torch index writes into the caches, decode_attention."""
    import cukiln

    def step():
        q, k = cukiln.rope_qk(s["q"], s["k"], cos_sin_cache=s["cos_sin"], positions=s["pos"], layout="thd",
                              inplace=True)
        s["k_cache"][s["rows"], :, s["pos"]] = k
        s["v_cache"][s["rows"], :, s["pos"]] = s["v"]
        return cukiln.decode_attention(q, s["k_cache"], s["v_cache"], s["lens_after"], out=s["out"])

    return step


def _rms_norm(x, weight):
    """Per-head RMSNorm in fp32: x * rsqrt(mean of x^2 over the head's features + eps) * weight."""
    import torch

    xf = x.float()
    return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + NORM_EPS) * weight


def _torch_step(s):
    """The plain torch step: RMSNorm in fp32 (where the set has it), the rotation formula on q and k, index writes
    into the caches, SDPA over the slice."""
    import torch.nn.functional as F

    from ..rope.qk_bench import rotate_formula

    dtype, n = s["k_cache"].dtype, s["L"] + 1

    def step():
        q, k = s["q"], s["k"]
        if s["norm_kw"]:
            q, k = _rms_norm(q, s["q_norm"]), _rms_norm(k, s["k_norm"])
        q, k = rotate_formula(q, k, s["cos_sin"], s["pos"], False)
        s["k_cache"][s["rows"], :, s["pos"]] = k.to(dtype)
        s["v_cache"][s["rows"], :, s["pos"]] = s["v"]
        return F.scaled_dot_product_attention(q.to(dtype).unsqueeze(2), s["k_cache"][:, :, :n],
                                              s["v_cache"][:, :, :n], enable_gqa=True)[:, :, 0]

    return step


def _pages(s) -> dict:
    """A page-16 NHD copy of the caches (flashinfer_peer.paged_copy: K and V pages apart, row i on its own run of
    pages) and its block table, FlashInfer's description of the L + 1 keys a row holds after the step; built once per
    input set and shared by cukiln's paged contenders and FlashInfer's."""
    if "pages" not in s:
        from .. import flashinfer_peer

        k_pages, v_pages, table = flashinfer_peer.paged_copy(s["k_cache"], s["v_cache"])
        s["pages"] = {"cache": (k_pages, v_pages), "table": table, **flashinfer_peer.pages_in_use(table, s["L"] + 1)}
    return s["pages"]


def _paged(s) -> dict:
    """_pages and FlashInfer's decode wrapper planned for L + 1 keys a row (ImportError where FlashInfer does not
    import)."""
    p = _pages(s)
    if "wrapper" not in p:
        import torch

        from .. import flashinfer_peer

        p["wrapper"] = flashinfer_peer.batch_decode(p["table"], s["L"] + 1, s["hq"], s["hkv"], HEAD_DIM, torch.bfloat16)
    return p


def _cukiln_paged_step(s):
    """cukiln's step over the page-16 pools through their block table (two launches: the append, the paged attention)."""
    import cukiln

    p = _pages(s)
    return lambda: cukiln.decode_step(s["q"], s["k"], s["v"], *p["cache"], s["lens"], kv_layout="bshd",
                                      block_table=p["table"], cos_sin_cache=s["cos_sin"], out=s["out"])


def _paged_attention_alone(s):
    import cukiln

    p = _pages(s)
    return lambda: cukiln.decode_attention(s["q"], *p["cache"], s["lens_after"], kv_layout="bshd",
                                           block_table=p["table"], out=s["out"])


def _cukiln_paged_append(s):
    """cukiln's append alone over the page-16 pools: q and k rotated, k and v written through the block table."""
    import cukiln

    p = _pages(s)
    q_rot = s["q"].clone()
    return lambda: cukiln.kv_append(s["q"], s["k"], s["v"], *p["cache"], s["lens"], kv_layout="bshd",
                                    block_table=p["table"], cos_sin_cache=s["cos_sin"], out=q_rot)


def _flashinfer_append(s):
    """FlashInfer's paged append alone (k and v as given, no rotation) into the same pools."""
    import flashinfer.page
    import torch

    p = _pages(s)
    batch_indices = torch.arange(s["b"], device="cuda", dtype=torch.int32)
    return lambda: flashinfer.page.append_paged_kv_cache(s["k"], s["v"], batch_indices, s["lens"], p["cache"],
                                                         p["indices"], p["indptr"], p["last"], "NHD")


def _flashinfer_three_calls(s):
    """FlashInfer's RoPE in place on the packed q and k, its paged append, its batch decode."""
    import flashinfer.page
    import flashinfer.rope
    import torch

    p = _paged(s)
    batch_indices = torch.arange(s["b"], device="cuda", dtype=torch.int32)

    def step():
        flashinfer.rope.apply_rope_with_cos_sin_cache_inplace(s["pos"], s["q2"], s["k2"], HEAD_DIM, s["cos_sin"], True)
        flashinfer.page.append_paged_kv_cache(s["k"], s["v"], batch_indices, s["lens"], p["cache"], p["indices"],
                                              p["indptr"], p["last"], "NHD")
        return p["wrapper"].run(s["q"], p["cache"], out=s["out"])

    return step


def _flashinfer_fused(s):
    """FlashInfer's fused kernel (norm policy 2 where the set has a norm, else none) writing the rotated q and
    appending k and v to the paged cache from the packed projection, then its batch decode. The kernel's clearing of
    the last page's unused rows is off: the decode reads only each row's L + 1 keys, so it is work the step does not
    need (FlashInfer's fastest form of the step)."""
    import torch
    from flashinfer.cake_fused_qk_rope_append import cake_fused_qk_rmsnorm_rope_append_paged_kv_cache as fused

    p = _paged(s)
    q_indptr = torch.arange(s["b"] + 1, device="cuda", dtype=torch.int32)  # one new token a row
    q_rot = torch.empty(s["b"], s["hq"], HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    norm = {}
    if s["norm_kw"]:
        norm = {"qk_norm_policy": 2, "q_norm_weight": s["q_norm"], "k_norm_weight": s["k_norm"], "eps": NORM_EPS}
    k_pages, v_pages = p["cache"]

    def step():
        fused(s["qkv"], s["cos_sin"], s["lens_after"], q_indptr, p["table"], k_pages, v_pages, num_q_heads=s["hq"],
              num_kv_heads=s["hkv"], out_q=q_rot, clear_unused_last_page_rows=False, **norm)
        return p["wrapper"].run(q_rot, p["cache"], out=s["out"])

    return step


# name -> (whether it applies to a case set, builder); the tables' column order
CONTENDERS = {
    BAR: (lambda cs: True, _attention_alone),
    SECOND_KERNEL: (lambda cs: cs.suffix == "", _attention_and_a_small_kernel),
    "cukiln decode_step": (lambda cs: True, _cukiln_step),
    "cukiln decode_step, bf16 caches": (lambda cs: cs.fp8, _cukiln_step_bf16),
    "cukiln separate calls": (lambda cs: not cs.norm and not cs.fp8, _cukiln_separate),
    "flashinfer three calls": (lambda cs: not cs.norm and not cs.fp8, _flashinfer_three_calls),
    "flashinfer fused + decode": (lambda cs: (cs.heads_q, cs.heads_kv) in FUSED_HEADS and not cs.fp8,
                                  _flashinfer_fused),
    "torch": (lambda cs: not cs.fp8, _torch_step),
    # paged caches (the main set): the step and its bar over FlashInfer's pools, and the appends alone
    "cukiln paged decode_step": (lambda cs: cs.suffix == "", _cukiln_paged_step),
    PAGED_BAR: (lambda cs: cs.suffix == "", _paged_attention_alone),
    APPENDS[0]: (lambda cs: cs.suffix == "", _cukiln_paged_append),
    APPENDS[1]: (lambda cs: cs.suffix == "", _flashinfer_append),
}


def _names(cs: CaseSet) -> list[str]:
    return [name for name, (applies, _) in CONTENDERS.items() if applies(cs)]


def contenders(cs: CaseSet, s: dict, names=None) -> dict:
    """name -> zero-argument step on the inputs ``s`` for the set's contenders (or ``names``), or why it could not
    be built (a string: FlashInfer does not import, or lacks an API)."""
    out = {}
    for name in _names(cs) if names is None else names:
        try:
            out[name] = CONTENDERS[name][1](s)
        except Exception as e:  # recorded, the rest still runs
            out[name] = failure(e)
    return out


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


def _check(cs: CaseSet) -> dict:
    """Each of the set's steps (its contenders but the bars, BAR and SECOND_KERNEL) against the float64 reference (with the set's norm weights)
    at CHECK_POINT, on inputs of its own (before anything is timed): name -> largest error relative to the
    reference's largest magnitude, or why it (or the reference) could not run."""
    import torch

    import cukiln

    errors = {}
    for name in _names(cs):
        if name in (*UNCHECKED, SECOND_KERNEL):
            continue
        s = setup_case(cs, *CHECK_POINT)
        try:
            ref = cukiln.reference.decode_step(s["q"], s["k"], s["v"], s["k_cache"].clone(), s["v_cache"].clone(),
                                               s["lens"].clone(), cos_sin_cache=s["cos_sin"], **s["norm_kw"])
        except Exception as e:  # a reference without the set's arguments: every contender of the set flagged wrong
            errors[name] = "reference: " + failure(e)
            continue
        step = contenders(cs, s, [name])[name]
        if isinstance(step, str):
            errors[name] = step
            continue
        try:
            got = step().double()
        except Exception as e:  # recorded; the contender is then timed as it comes, flagged wrong
            errors[name] = failure(e)
            continue
        scale = ref.abs().max().item()
        errors[name] = float("inf") if torch.isnan(got).any() else ((got - ref).abs().max() / scale).item()
    return errors


def _time_point(cs: CaseSet, b: int, L: int, errors: dict, copy: float) -> dict:
    """One row of a set: each contender's eager and graph-replayed GPU time at batch b, cache length L."""
    row = {"batch": b, "cache_len": L, "bytes": step_bytes(b, L, cs.heads_q, cs.heads_kv, 1 if cs.fp8 else 2)}
    s = setup_case(cs, b, L)
    for name, fn in contenders(cs, s).items():
        if isinstance(fn, str):
            row[name] = {"skipped": fn}
            continue
        error = errors.get(name)
        wrong = name not in (*UNCHECKED, SECOND_KERNEL) and (not isinstance(error, float) or error > ERROR_LIMIT)
        try:
            ms = median_ms([fn])
        except Exception as e:  # recorded, the rest still runs
            row[name] = {"skipped": failure(e)}
            continue
        row[name] = {"ms": ms, "tbps": tbps(row["bytes"], ms), "x_copy": tbps(row["bytes"], ms) / copy,
                     "wrong": wrong}
        try:
            row[name]["graph_ms"] = _graph_ms(fn)
        except Exception as e:  # not capturable: recorded
            row[name]["graph_skipped"] = failure(e)
    return row


def _host_us(cs: CaseSet) -> dict:
    """Host µs per eager step at HOST_POINT for each contender of the set (or why it failed), and torch's add_."""
    import torch

    from ..overhead import per_call_us

    s = setup_case(cs, *HOST_POINT)
    calls = contenders(cs, s)
    y = torch.randn(1, device="cuda")
    calls["torch: y.add_(1.0)"] = lambda: y.add_(1.0)
    try:
        calls[LAUNCH_FLOOR] = bare_step_launches(s)
    except Exception as e:  # recorded, the rest still runs
        calls[LAUNCH_FLOOR] = failure(e)
    host = {}
    for name, fn in calls.items():
        if isinstance(fn, str):
            host[name] = fn
            continue
        try:
            per_call_us(fn, 300)
            host[name] = sorted(per_call_us(fn, 2000) for _ in range(5))[2]
        except Exception as e:  # recorded, the rest still runs
            host[name] = failure(e)
    return host


LAUNCH_FLOOR = "cukiln decode_step's kernels, bare driver launches"


def bare_step_launches(s):
    """The driver's share of one eager cukiln.decode_step: its kernels as the step plans them (the fused one, or the
    append and the attention; then the combine where the plan splits past a cluster) launched with parameters packed
    once, no Python planning: the floor of any host path that launches them from Python."""
    import torch

    from cukiln import decode_api, decode_step_api
    from cukiln.launch import kernel

    from ..overhead import bare_launch

    step = decode_step_api.plan_call(s["q"], s["k"], s["v"], s["k_cache"], s["v_cache"], s["lens"],
                                     cos_sin_cache=s["cos_sin"], out=s["out"], **s["norm_kw"])
    q_rot, lens_after = torch.empty_like(s["q"]), torch.empty_like(s["lens"])
    d = step.attention
    splits = d.batch * d.heads_q * d.num_splits
    partial = torch.empty(splits * (d.head_dim + 1), dtype=torch.float32, device="cuda")
    attention, combine = decode_api.launch_values(d, out=s["out"].data_ptr(), lse=0, partial_out=partial.data_ptr(),
                                                  partial_lse=partial.data_ptr() + 4 * splits * d.head_dim)
    attention = list(attention)
    names = d.attention.field_names
    a = step.append
    append = dict(zip(a.field_names, a.values))
    # the plan's stand-ins for the rotated query and the new lengths were freed: this step's own (q_out at the
    # rotated span's start, as the plan points it)
    span = append["rotary_offset"] * s["q"].element_size()
    append["q_out"], append["kv_lens_out"] = q_rot.data_ptr() + span, lens_after.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    if step.fused is not None:  # the attention reads the lengths before the step and rotates its own query
        attention[names.index("kv_lens")] = s["lens"].data_ptr()
        launches = [bare_launch(step.fused, attention + list(append.values()), stream)]
    else:
        attention[names.index("q")], attention[names.index("kv_lens")] = q_rot.data_ptr(), lens_after.data_ptr()
        launches = [bare_launch(kernel(a.device, a.module, a.symbol, a.fmt, a.grid, a.block, a.shared,
                                       a.overlap_previous), list(append.values()), stream)]
        k = d.attention
        launches.append(bare_launch(kernel(d.device, k.module, k.symbol, k.fmt, k.grid, k.block, k.shared,
                                           k.overlap_previous, k.cluster), attention, stream))
    if d.combine is not None:
        k = d.combine
        launches.append(bare_launch(kernel(d.device, k.module, k.symbol, k.fmt, k.grid, k.block, k.shared,
                                           k.overlap_previous, k.cluster), combine, stream))

    def step_launches():
        for launch in launches:
            launch()

    step_launches.keep = (q_rot, lens_after, partial)  # the buffers the launches write live as long as the step
    return step_launches


def _shape(cs: CaseSet) -> dict:
    shape = {"heads_q": cs.heads_q, "heads_kv": cs.heads_kv, "head_dim": HEAD_DIM, "dtype": "bf16",
             "page_size": PAGE, "capacity": f"cache_len + {SLACK}"}
    if cs.fp8:
        shape["kv_dtype"] = f"fp8_e4m3, scale {FP8_SCALE} per KV head"
    if cs.norm:
        shape["qk_norm"] = f"per-head RMSNorm of q and k (fp32 weights [{HEAD_DIM}], eps {NORM_EPS:g}) before RoPE"
    if "flashinfer fused + decode" in _names(cs):
        shape["flashinfer_fused"] = "clear_unused_last_page_rows=False"
    return shape


def run(console: Console, args) -> dict:
    import torch

    full = not args.quick and os.environ.get(FULL_GRID_ENV) == "1"
    fp8 = getattr(args, "kv_dtype", None) == "fp8_e4m3"
    sets = (FP8_SET,) if fp8 else SETS
    grids = {cs: cs.quick if args.quick else GRID if full else cs.grid for cs in sets}
    command = "cukiln bench decode-step" + (" --quick" if args.quick else "") + (" --kv-dtype fp8_e4m3" if fp8 else "")
    result = run_metadata("decode-step", f"{FULL_GRID_ENV}=1 {command}" if full else command)
    result["copy_tbps"] = copy = copy_tbps()
    console.print(f"device-to-device copy: {copy:.3f} TB/s (read + write)")
    errors = {}
    for cs in sets:
        errors[cs] = _check(cs)
        console.print(f"{cs.title}: largest error relative to the reference's largest magnitude: " +
                      ", ".join(f"{n} {e if isinstance(e, str) else f'{e:.2g}'}" for n, e in errors[cs].items()))
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("decode-step cases", total=sum(len(g) for g in grids.values()))
        for cs in sets:
            rows = []
            for b, L in grids[cs]:
                rows.append(_time_point(cs, b, L, errors[cs], copy))
                torch.cuda.empty_cache()
                progress.advance(task)
            result.update({"shape" + cs.suffix: _shape(cs), "max_rel_err" + cs.suffix: errors[cs],
                           "cases" + cs.suffix: rows})
    for cs in sets:
        result["host_us_b1" + cs.suffix] = _host_us(cs)
    return result


def _cell(v: dict) -> str:
    if "ms" not in v:
        return "skipped" if "skipped" in v else "-"
    graph = f"{v['graph_ms'] * 1e3:.1f}" if "graph_ms" in v else "-"
    return f"{v['ms'] * 1e3:.1f} / {graph}" + (" wrong" if v.get("wrong") else "")


def _over(row: dict, step: str, bar: str) -> str:
    """A step's eager µs over its bar's (its attention alone), or "-"."""
    a, b = row.get(step, {}), row.get(bar, {})
    return f"{(a['ms'] - b['ms']) * 1e3:.2f}" if "ms" in a and "ms" in b else "-"


def _vs_flashinfer(row: dict) -> str:
    """FlashInfer's faster contender in the row (eager, not flagged wrong) over decode_step's time, and which."""
    step = row.get("cukiln decode_step", {})
    timed = [(v["ms"], n) for n, v in row.items() if n.startswith("flashinfer") and n not in APPENDS
             and isinstance(v, dict) and "ms" in v and not v.get("wrong")]
    if "ms" not in step or not timed:
        return "-"
    ms, name = min(timed)
    return f"{ms / step['ms']:.2f}x ({name.removeprefix('flashinfer ')})"


def show(result: dict, console: Console) -> None:
    """One table per case set in the result (older results: the 32/8 grid only), each with its host times."""
    for cs in SETS + (FP8_SET,):
        rows = result.get("cases" + cs.suffix)
        if rows is None:
            continue
        names = _names(cs)
        table = Table(title=f"decode step on {result['device']} ({cs.title}): us per step, eager / graph; "
                            "vs FlashInfer: its faster contender's eager time over decode_step's",
                      title_justify="left")
        paged = PAGED_BAR in names
        for col in ("b", "cache len", *names, "step - attention", *(("paged step - paged attention",) if paged else ()),
                    "vs FlashInfer"):
            table.add_column(col, justify="right")
        for r in rows:
            extra = [_over(r, "cukiln decode_step", BAR)] + ([_over(r, "cukiln paged decode_step", PAGED_BAR)]
                                                             if paged else [])
            table.add_row(str(r["batch"]), str(r["cache_len"]), *(_cell(r.get(n, {})) for n in names), *extra,
                          _vs_flashinfer(r))
        console.print(table)
        host = result.get("host_us_b1" + cs.suffix, {})
        console.print(f"host us per eager step at b 1 ({cs.title}): " +
                      ", ".join(f"{n} {v:.1f}" if isinstance(v, float) else f"{n} skipped" for n, v in host.items()))
