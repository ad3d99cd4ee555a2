"""RoPE kernel-shape sweep: which compile-time and launch-time shape moves the most bytes per second.

Two steps, so the compiling happens on a machine without a GPU:

    python benchmarks/rope_sweep.py build DIR          # render + compile every config for sm_90 into DIR
    python benchmarks/rope_sweep.py run DIR [--out F]  # GPU: time every config x launch shape x case

Compile-time knobs: heads in flight per thread, the __launch_bounds__ minimum of blocks per SM, the
evict-first (`.cs`) hint on x's loads and out's stores (an earlier version also tried L2 prefetch hints on
loads: results/rope-sweep-prefetch-h100-2026-11-23.json).
Launch-time knobs: threads per block, block rows (tokens) per block, a grid capped at a multiple of the SM
count (blocks then loop over tokens), and for (b, h, s, d) views also seq-major token numbering. Each row
is first run once on a NaN-poisoned output and compared with cukiln.rope (flagged WRONG when it differs),
then timed as bench does (CUDA events, median, rotating buffers) beside a copy of the same bytes and a 1 GiB
copy. Raw launches, without the runtime's programmatic launch: compare configs within a run, and confirm a
winner in bench conditions (benchmarks/ab_cubins.sh), where back-to-back calls can rank them otherwise.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from cukiln.codegen import render, rope_family
from cukiln.codegen.nvrtc import compile_cubin, parse_ptxas_log
from cukiln.codegen.axes import Dtype
from cukiln.codegen.rope_variants import parse_rope_name

from raw_launch import launcher, load_functions, selected, sweep_main

# name -> (heads in flight, min blocks per SM, max threads per block, evict-first hints on x and out). Earlier runs
# also tried (8, 1, 256), (8, 2, 128), (4, 4, 128), (4, 8, 64) (results/rope-sweep-h100-2026-11-23.json), and x
# staged in shared memory by cp.async with an evict-last policy on the angle tables (configs *_staged*, *_keep;
# the template change: `git show 6d07f26:benchmarks/studies/rope-staged-keep.patch`; results/rope-staged-*-h100-2026-11-25.json).
CONFIGS = {
    "h2_b3_cs": (2, 3, 256, True),
    "h4_b2_cs": (4, 2, 256, True),
    # the same without the evict-first hints: on an H200, h4_b2 reads 0.982x copy at 1 GiB against the build's 0.947,
    # all within 1 % below 128 MB (results/rope-sweep-h200-2026-12-03-hints.json); in bench conditions it lifts the
    # inputs of 256 MB or more by 3-8 % and costs the medium ones 3-7 % (results/rope-heads-hints-ab-h200-2026-12-03.json)
    "h2_b3": (2, 3, 256, False),
    "h4_b2": (4, 2, 256, False),
}
# On an H200 the thd kernel ran at 34 % occupancy (80 registers) with DRAM at 73 % of its peak under Nsight Compute
# (results/ncu-decode-rope-thd-h200-2026-12-02.txt). More blocks a multiprocessor at the same loads in flight
# (2, 4, 256) or more loads at the same blocks (4, 3, 256) spill 244-312 and 560-696 bytes a thread: not timed.
DEFAULT_CONFIG = "h2_b3_cs"  # the build's (rope_abi.HEADS_IN_FLIGHT, MIN_BLOCKS_PER_SM, MAX_THREADS_PER_BLOCK, STREAMING)
SYMBOLS = [f"rope_bf16_dense_half_freqs_s{s}_v8" for s in (0, 3)]


def build(out_dir: Path, only: str = "") -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    variants = [parse_rope_name(s) for s in SYMBOLS]
    index = {}
    for name, (heads, min_blocks, threads, streaming) in selected(CONFIGS, only).items():
        source = rope_family.render_module(Dtype.BF16, variants, min_blocks=min_blocks, max_threads=threads)
        headers = render.render_headers({"rope": {"heads_in_flight": heads, "streaming": streaming}})
        cubin, log, seconds = compile_cubin(source, f"sweep_{name}", "sm_90", headers)
        (out_dir / f"{name}.cubin").write_bytes(cubin)
        resources = {k: vars(v) for k, v in parse_ptxas_log(log).items()}
        index[name] = {"heads_in_flight": heads, "min_blocks": min_blocks, "max_threads": threads, "streaming": streaming,
                       "resources": resources}
        regs = {k: (v["registers"], v["spill_store_bytes"] + v["spill_load_bytes"]) for k, v in resources.items()}
        print(f"{name}: {seconds:.1f} s, (registers, spill bytes) {regs}")
    (out_dir / "index.json").write_text(json.dumps(index, indent=1))


# --- GPU side -------------------------------------------------------------------------------------

def _cases():
    """(name, shape [s,b,h,d], view, rotary_dim, in place)."""
    return [
        ("A [4096,1,128,128] sbhd", (4096, 1, 128, 128), "sbhd", 128, False),
        ("B [512,32,24,128] sbhd", (512, 32, 24, 128), "sbhd", 128, False),
        ("C [4096,2,32,128] sbhd", (4096, 2, 32, 128), "sbhd", 128, False),
        ("D [4096,2,32,128] bhsd->bshd", (4096, 2, 32, 128), "bhsd->bshd", 128, False),
        ("E [4096,1,128,128] in place rd=32", (4096, 1, 128, 128), "sbhd", 32, True),
        ("F [65536,1,32,128] sbhd", (65536, 1, 32, 128), "sbhd", 128, False),
    ]


def _launch_shapes(groups: int, heads: int, tokens: int, heads_in_flight: int, threads: int, sms: int):
    """(label, block, grid) candidates: every split of the block between heads (y) and tokens (z)."""
    bx = min(groups, 32)
    out, seen = [], set()
    for head_iters in (1, 2, 4, 8):
        by = max(1, min(-(-heads // (heads_in_flight * head_iters)), threads // bx))
        for bz in (1, 2, 4, 8, 16, 32):
            if bx * by * bz > threads or bz > tokens or (by, bz) in seen:
                continue
            seen.add((by, bz))
            out.append((f"by{by} bz{bz}", (bx, by, bz), -(-tokens // bz)))
    return out


def run(cubin_dir: Path, out_path: Path | None) -> None:
    import torch

    import cukiln
    from cukiln import rope_api
    from cukiln.tools.timing import copy_tbps, median_ms, rotating_sets

    index = json.loads((cubin_dir / "index.json").read_text())
    torch.cuda.init()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    big_copy = copy_tbps()
    print(f"1 GiB copy {big_copy:.3f} TB/s")
    functions = {name: load_functions(cubin_dir / f"{name}.cubin", SYMBOLS) for name in index}
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for case, (S, B, H, D), view, rd, in_place in _cases():
        freqs = torch.rand(S, 1, 1, rd, device="cuda") * 100

        def make():
            if view == "sbhd":
                x = torch.randn(S, B, H, D, device="cuda", dtype=torch.bfloat16)
            else:
                x = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            return x, (x if in_place else torch.empty_like(x))

        moved = 2 * S * B * H * rd * 2 + freqs.numel() * 4 + (0 if in_place else 2 * S * B * H * (D - rd) * 2)
        sets = rotating_sets(make, moved)
        layout = "sbhd" if view == "sbhd" else "bshd"
        same_copy = median_ms([lambda x=x, o=o: o.copy_(x) for x, o in sets if o is not x] or
                              [lambda x=x: torch.empty_like(x).copy_(x) for x, _ in sets])
        copy_row = {"case": case, "config": "copy of x", "ms": same_copy}
        print(f"{case}: copy of the same tensor {same_copy * 1e3:.1f} us")
        plans = [rope_api.plan_call(x, freqs=freqs, layout=layout, rotary_dim=rd, inplace=in_place,
                                    **({} if in_place else {"out": o}))[0] for x, o in sets]
        symbol = plans[0].symbol
        copy_row["default_block"] = list(plans[0].block)
        rows.append(copy_row)
        x0, o0 = sets[0]
        x_saved = x0.clone()
        expected = cukiln.rope(x_saved, freqs=freqs, layout=layout, rotary_dim=rd).float()

        def max_error(call) -> float:
            """Run ``call`` (bound to sets[0]) once on a NaN-poisoned output (in place: on x as first made): its
            largest difference from cukiln.rope's (the installed build), x restored after an in-place call."""
            if in_place:
                x0.copy_(x_saved)  # the timing calls have rotated it again and again
            else:
                o0.fill_(float("nan"))
            call()
            err = (o0.float() - expected).abs().max().item()
            if in_place:
                x0.copy_(x_saved)
            return err
        groups = rd // 2 // parse_rope_name(symbol).vec
        # Token numbering: the plan's (batch-major for a (b, h, s, d) view, following memory), and for such views
        # also seq-major, where both batches' tokens of one position (one angle-table row) run side by side.
        orders = [("", [p.values for p in plans])]
        if view != "sbhd":
            at = plans[0].field_names.index("seq_major")
            orders.append((" seq-major", [p.values[:at] + (1 - p.values[at],) + p.values[at + 1:] for p in plans]))
        for name, cfg in index.items():
            fn = functions[name][symbol]
            for (label, block, grid), (order, values) in itertools.product(
                    _launch_shapes(groups, H, S * B, cfg["heads_in_flight"], cfg["max_threads"], sms), orders):
                label += order
                calls = [launcher(fn, p.fmt, v, (grid, 1, 1), block, 0, stream) for p, v in zip(plans, values)]
                err = max_error(calls[0])
                ms = median_ms(calls)
                tbps = moved / (ms * 1e-3) / 1e12
                rows.append({"case": case, "config": name, "launch": label, "block": list(block), "symbol": symbol, "ms": ms,
                             "tbps": tbps, "x_big_copy": tbps / big_copy,
                             "x_same_copy": same_copy / ms if not in_place else None, "max_abs_diff": err})
                # the same arithmetic in another order may differ by a bf16 ulp (1/32 at |y| < 8); a bug gives NaN
                flag = "" if err <= 1 / 16 else f"  WRONG (max abs diff {err:.3g})"
                print(f"  {name:14s} {label:32s} {ms * 1e3:7.1f} us {tbps:5.2f} TB/s {tbps / big_copy:5.3f}x{flag}")
    torch.cuda.synchronize()
    result = {"device": torch.cuda.get_device_name(0), "big_copy_tbps": big_copy, "configs": index, "rows": rows}
    if out_path:
        out_path.write_text(json.dumps(result, indent=1))
    print("\nbest per case (x 1 GiB copy):")
    for case, *_ in _cases():
        timed = [r for r in rows if r["case"] == case and "tbps" in r]
        best = sorted(timed, key=lambda r: r["ms"])[:3]
        default_block = [r for r in rows if r["case"] == case and "default_block" in r][0]["default_block"]
        base = [r for r in timed if r["config"] == DEFAULT_CONFIG and r["block"] == default_block][0]
        print(f"{case}: default {base['x_big_copy']:.3f}; best " +
              "; ".join(f"{r['config']} {r['launch']} {r['x_big_copy']:.3f}" for r in best))


if __name__ == "__main__":
    sys.exit(sweep_main(sys.argv[1:], __doc__, build, run))
