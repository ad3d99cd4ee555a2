"""Decode-attention pipeline sweep: how many K/V stages, and how many splits, move the most bytes.

Two steps, so the compiling happens on a machine without a GPU:

    python benchmarks/decode_sweep.py build DIR          # render + compile every config for sm_90 into DIR
    python benchmarks/decode_sweep.py run DIR [--out F] [--cases 1x8192,8x512]
                                                         # GPU: time every config x split count x case

Compile-time knobs: K/V pipeline stages for head dim 128, the L2 fetch size of the K/V copies, warps
per block and keys each warp takes of
a tile per round (the tile is warps x keys: 8 warps of 16 or 4 of 32 walk 128-key tiles, the build's
wide variant), from the build's template (shared memory: 4 KB + stages x 34 KB x warps x keys / 64). Earlier runs: 2-6 stages
(results/decode-stages-sweep-h100-2026-11-23.json), L2 fetch sizes (results/decode-l2-sweep-h100-2026-11-23.json), the leaner loop (decode-lean-loop-sweep-...),
8 warps (decode-warps-sweep-h100-2026-11-23.json). Launch-time knob: the split count (SPLITS, where at
least 64 keys a split and at most 4096 blocks remain); the combine kernel starts as the runtime starts
it (programmatic launch). Cases: the bench grid of `cukiln bench decode` (bf16, h_q 32, h_kv 8, d 128)
or those given, timed as bench times (CUDA events, median, rotating buffers) beside torch SDPA on the
same inputs; a result further than 0.02 from SDPA's is flagged WRONG.

FP8_CONFIGS sweep the FP8 (e4m3) cache kernel's geometry the same way (stages, warps, keys a warp takes of a
tile: the build's is 4 warps of 16 keys, 2 stages at head dim 128, three blocks a multiprocessor), on the same values
in FP8 (16 x the bf16 draw, scales 1/16), bytes counted as FP8, against SDPA over the dequantized cache. The cases'
group of 4 heads takes the per-warp rings (attend_fp8_chunk), whose depth follows from the same shared memory (the
widened tiles' and stages' region over the warps, 16-key chunks).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from cukiln.codegen import decode_abi, decode_family, render
from cukiln.codegen.decode_variants import Cache, DecodeCombineVariant, DecodeVariant, Pipeline
from cukiln.codegen.nvrtc import compile_cubin, parse_ptxas_log
from cukiln.codegen.axes import Dtype

from raw_launch import (allow_shared, launcher, load_functions, sdpa_case, selected, sweep_main,
                        timed_against_sdpa)

# name -> (stages for head dim 128, warps, keys a warp takes of each tile, L2 fetch of K/V copies). Tried and
# dropped: each K/V row as one TMA bulk copy completing on the stage's mbarrier, issued by one warp
# (results/decode-bulk-sweep-h100-2026-11-25.json: 0.79-0.93x the cp.async kernel at 2 stages, less at 3 or
# with 128-key tiles); whole K/V tiles bulk-prefetched into L2 (`cp.async.bulk.prefetch.L2`, one thread, 2-4
# tiles ahead of the copies; results/decode-l2-ahead-sweep-h100-2026-11-25.json: at best 0.85-0.94x copy
# against 0.93-0.99x without at b = 32-128; b = 1, T = 128k 0.962 against 0.944, b = 8 within 1 %).
# The fifth field: the next tile's copies issued before the wait for the current one (decode_abi.ISSUE_EARLY).
CONFIGS = {
    "w4_s2": (2, 4, 16, decode_abi.L2_PREFETCH, False),
    "w4_s3": (3, 4, 16, decode_abi.L2_PREFETCH, False),
    "w4k32_s2": (2, 4, 32, decode_abi.L2_PREFETCH, False),
    "w4_s2_early": (2, 4, 16, decode_abi.L2_PREFETCH, True),
    "w4_s3_early": (3, 4, 16, decode_abi.L2_PREFETCH, True),
    "w4k32_s2_early": (2, 4, 32, decode_abi.L2_PREFETCH, True),
    # the L2 fetch size again on an H200, where the L2 and not DRAM ran at its limit under Nsight Compute
    # (results/ncu-decode-rope-thd-h200-2026-12-02.txt: L2 94-95 %, DRAM 87-90 %, half the K/V sectors L2 hits)
    "w4_s3_l2_none": (3, 4, 16, "", False),
    "w4_s3_l2_256": (3, 4, 16, ".L2::256B", False),
}
# FP8 caches: name -> (stages, warps, keys a warp takes of each tile, the next tile's copies issued before the wait);
# the FP8 kernel's per-tile work (a wait, a barrier, each warp widening its keys) is what these trade against the
# tile's bytes
FP8_CONFIGS = {
    "fp8_w4_s2": (2, 4, 16, False),
    "fp8_w4_s3": (3, 4, 16, False),
    "fp8_w4_s4": (4, 4, 16, False),
    "fp8_w4_s3_early": (3, 4, 16, True),
    "fp8_w4_s4_early": (4, 4, 16, True),
    "fp8_w4k32_s2": (2, 4, 32, False),
    "fp8_w4k32_s3": (3, 4, 32, False),
    "fp8_w8_s3": (3, 8, 16, False),
    "fp8_w8_s2": (2, 8, 16, False),
}
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
HEAD_DIM = 128
COMBINE = DecodeCombineVariant(Dtype.BF16, HEAD_DIM)


def _configs() -> dict:
    """Every config: name -> (stages, warps, keys a warp takes, L2 fetch, issue early, cache)."""
    found = {name: (*cfg, Cache.SAME) for name, cfg in CONFIGS.items()}
    found.update({name: (stages, warps, keys, decode_abi.L2_PREFETCH, early, Cache.E4M3)
                  for name, (stages, warps, keys, early) in FP8_CONFIGS.items()})
    return found


def build(out_dir: Path, only: str = "") -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    index = {}
    for name, (stages, warps, keys, l2_prefetch, issue_early, cache) in selected(_configs(), only).items():
        tile = warps * keys
        # the build's variant of this tile (its name is the symbol); the geometry is the config's
        fp8 = cache is Cache.E4M3
        attention = DecodeVariant(Dtype.BF16, HEAD_DIM, 3, 16 if fp8 else 8,
                                  Pipeline.WIDE if tile == 128 else Pipeline.NARROW, cache)
        shared = decode_abi.shared_bytes(HEAD_DIM, n_stages=stages, warps=warps, tile=tile, cache=cache)
        resident = decode_abi.min_blocks_per_sm(HEAD_DIM, n_stages=stages, warps=warps, tile=tile, cache=cache)
        source = decode_family.render_module(Dtype.BF16, [attention, COMBINE], warps=warps,
                                             geometry={attention.name: (tile, stages, resident)})
        headers = render.render_headers({"decode": {"warps": warps, "l2_prefetch": l2_prefetch,
                                                    "issue_early": issue_early}})
        cubin, log, seconds = compile_cubin(source, f"sweep_{name}", "sm_90", headers)
        (out_dir / f"{name}.cubin").write_bytes(cubin)
        resources = {k: vars(v) for k, v in parse_ptxas_log(log).items()}
        index[name] = {"stages": stages, "warps": warps, "keys_per_warp": keys, "l2_prefetch": l2_prefetch,
                       "issue_early": issue_early, "kv_dtype": "fp8_e4m3" if fp8 else "bf16",
                       "symbol": attention.name,
                       "shared": shared,
                       "resources": resources}
        regs = {k: (v["registers"], v["spill_store_bytes"] + v["spill_load_bytes"]) for k, v in resources.items()}
        print(f"{name}: {seconds:.1f} s, (registers, spill bytes) {regs}")
    (out_dir / "index.json").write_text(json.dumps(index, indent=1))


# --- GPU side -------------------------------------------------------------------------------------

def _split_counts(blocks: int, T: int) -> list[int]:
    return [s for s in SPLITS if s == 1 or (T // s >= 64 and blocks * s <= 4096)]


def _fp8_case(sets):
    """The sets' values in FP8 (the FP8 decode bench's as_fp8), SDPA's output over them dequantized (fp32), the plan's
    scale arguments."""
    from cukiln.tools.decode.bench import FP8_SCALE, as_fp8, torch_sdpa

    converted = [(q, *as_fp8(k, v)) for q, k, v in sets]
    q, _, _, k16, v16 = converted[0]
    return [s[:3] for s in converted], torch_sdpa(q, k16, v16).float(), {"k_scale": FP8_SCALE, "v_scale": FP8_SCALE}


def run(cubin_dir: Path, out_path: Path | None, cases=None) -> None:
    import torch

    from cukiln.decode_api import plan_call
    from cukiln.tools.decode.bench import BENCH_GRID, HEADS_KV
    from cukiln.tools.timing import copy_tbps

    index = json.loads((cubin_dir / "index.json").read_text())
    torch.cuda.init()
    copy = copy_tbps()
    print(f"1 GiB copy {copy:.3f} TB/s")
    functions = {name: load_functions(cubin_dir / f"{name}.cubin", [cfg["symbol"], COMBINE.name])
                 for name, cfg in index.items()}
    for name, cfg in index.items():
        allow_shared(functions[name][cfg["symbol"]], cfg["shared"])
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for b, T in cases or BENCH_GRID:
        sets, nbytes, sdpa, ref = sdpa_case(b, T)
        print(f"b={b} T={T}: sdpa {sdpa * 1e3:.1f} us ({nbytes / sdpa / 1e9 / copy:.3f}x copy)")
        row = {"batch": b, "T": T, "kv_bytes": nbytes, "sdpa_ms": sdpa, "configs": {}}
        outs = [torch.empty_like(s[0]) for s in sets]
        kinds = {"bf16": (sets, ref, {}, nbytes)}
        if any(cfg.get("kv_dtype") == "fp8_e4m3" for cfg in index.values()):
            kinds["fp8_e4m3"] = (*_fp8_case(sets), nbytes // 2)
        for splits, (kind, (kind_sets, kind_ref, scales, kind_bytes)) in itertools.product(
                _split_counts(b * HEADS_KV, T), kinds.items()):
            plans = [plan_call(*s, T, num_splits=splits, **scales) for s in kind_sets]
            work = [(torch.empty(b, 32, splits, HEAD_DIM, device="cuda"), torch.empty(b, 32, splits, device="cuda"))
                    for _ in kind_sets]
            for name, cfg in index.items():
                if cfg.get("kv_dtype", "bf16") != kind:
                    continue
                calls = []
                for plan, out, (p_out, p_lse) in zip(plans, outs, work):
                    # as the runtime launches it: a workspace only for the combine kernel (one pass or a
                    # cluster merge write the output), programmatically, in the plan's clusters
                    merged_by_kernel = plan.combine is not None
                    att, comb = plan.values(out=out.data_ptr(), lse=0,
                                            partial_out=p_out.data_ptr() if merged_by_kernel else 0,
                                            partial_lse=p_lse.data_ptr() if merged_by_kernel else 0)
                    a = plan.attention
                    steps = [launcher(functions[name][cfg["symbol"]], a.fmt, att, a.grid, (32 * cfg["warps"], 1, 1),
                                      cfg["shared"], stream, overlap_previous=True, cluster=a.cluster)]
                    if plan.combine is not None:
                        c = plan.combine
                        steps.append(launcher(functions[name][c.symbol], c.fmt, comb, c.grid, c.block, 0, stream,
                                              overlap_previous=True))
                    calls.append(lambda steps=steps: [step() for step in steps])
                row["configs"].setdefault(name, {})[splits] = timed_against_sdpa(
                    calls, outs[0], kind_ref, f"{name} splits {splits:4d}", kind_bytes, copy, sdpa)
        rows.append(row)
        del sets, outs
        torch.cuda.empty_cache()
    result = {"device": torch.cuda.get_device_name(0), "copy_tbps": copy, "configs": index, "rows": rows}
    if out_path:
        out_path.write_text(json.dumps(result, indent=1))
    print("\nbest per case (x copy of the config's own bytes: FP8 ones half; x sdpa):")
    for r in rows:
        best = {name: min(t.items(), key=lambda kv: kv[1]["ms"]) for name, t in r["configs"].items()}
        share = {name: 2 if index[name].get("kv_dtype") == "fp8_e4m3" else 1 for name in best}
        print(f"b={r['batch']:4d} T={r['T']:6d} " + " ".join(
            f"{name}:{s}:{r['kv_bytes'] / share[name] / t['ms'] / 1e9 / copy:.3f}/{r['sdpa_ms'] / t['ms']:.2f}"
            for name, (s, t) in best.items()))


if __name__ == "__main__":
    sys.exit(sweep_main(sys.argv[1:], __doc__, build, run))
