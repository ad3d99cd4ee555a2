"""Warp-specialized decode attention, stage counts and an L2 evict-first hint: the build's ws pipeline
(`attend_ws` in templates/decode.cuh.j2: 4 consumer warps computing as the other pipelines do, reading
128-byte-swizzled tiles, one producer warp loading 64-key K/V tiles by the TMA engine from 4-D tensor maps of the
caches, here made per input set) compiled with 3 stages (two blocks a multiprocessor, the build's ws) and 4-6 (one
block a multiprocessor; the build's ws_deep takes 4), with the build's evict-first L2 policy on the K/V loads
(before ws_deep: 2-4 stages, with and without it). One pass, or splits merged by the build's combine kernel (the sweep launches no clusters). It came
before the pipeline (results/decode-ws-sweep-h100-2026-11-25.json; the evict-first configs:
results/decode-ws-sweep-h100-2026-11-25-evict-first.json).

    python benchmarks/decode_ws_sweep.py build DIR          # render + compile for sm_90 (no GPU)
    python benchmarks/decode_ws_sweep.py run DIR [--out F] [--cases 32x2048,128x8192]

Cases: the large grids where cukiln trails torch SDPA, and two small ones, bf16, h_q 32, h_kv 8, d 128, timed as
`cukiln bench decode` times (CUDA events, rotating inputs) beside torch SDPA and cukiln.decode_attention (the tuned
build) in the same run; an output further than 0.02 from SDPA's is flagged WRONG.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

from cukiln.codegen import decode_abi, decode_family, render
from cukiln.codegen.axes import Dtype
from cukiln.codegen.decode_variants import DecodeCombineVariant, DecodeVariant, Pipeline

from raw_launch import (allow_shared, build_cubin, launcher, load_functions, sdpa_case, sweep_main,
                        timed_against_sdpa)

HEAD_DIM, KEYS, HEAD_ROWS = 128, 64, decode_abi.HEAD_ROWS
# name -> (stages, blocks per SM the launch bound asks for, K/V loads with an L2 evict-first hint)
# (results before 2026-11-27's ws_deep: 2-4 stages with and without the hint; since: the build's hint, the ws ring of
# two blocks a multiprocessor against the deeper rings of one: 4, ws_deep's since the sweep of ring depths, to 6)
CONFIGS = {"ws_s3_evict_first": (3, 2, True), "ws_s4_evict_first": (4, 1, True), "ws_s5_evict_first": (5, 1, True),
           "ws_s6_evict_first": (6, 1, True),
           # the ws and ws_deep rings without the hint again, for the H200: there the L2 ran at its limit under the ws
           # kernel with a quarter of its sector lookups hits, where cuDNN's had under 1 %
           # (results/ncu-decode-rope-thd-h200-2026-12-02.txt)
           "ws_s3": (3, 2, False), "ws_s4": (4, 1, False)}
THREADS = 32 * (decode_abi.WARPS + 1)
COMBINE = DecodeCombineVariant(Dtype.BF16, HEAD_DIM)
# the build's variant whose parameters the kernel takes after its two tensor maps
ATTENTION = DecodeVariant(Dtype.BF16, HEAD_DIM, 3, 8, Pipeline.NARROW)
CASES = ((32, 2048), (32, 8192), (128, 2048), (128, 8192), (8, 32768), (1, 131072), (8, 512), (1, 8192))
SPLITS = (1, 2, 4, 8, 16, 32)


def shared_bytes(stages: int) -> int:
    """1 KB to align the stages, the K/V stages (unpadded 64-key tiles), the padded query tile, the mbarriers."""
    return 1024 + stages * 2 * KEYS * HEAD_DIM * 2 + HEAD_ROWS * (HEAD_DIM + decode_abi.ROW_PADDING) * 2 + 16 * stages


def _source() -> str:
    fields = "\n".join(f"  {ctype} {name};" for ctype, name in decode_abi.decode_params(ATTENTION))
    entries = "\n".join(
        f'extern "C" __global__ void __launch_bounds__({THREADS}, {blocks}) decode_{name}(const __grid_constant__ '
        f"ws_params p) {{\n  cukiln::decode::attend_ws<cukiln::bf16, {HEAD_DIM}, {KEYS}, {stages}, 1, "
        f"{'true' if evict_first else 'false'}>(p);\n}}"
        for name, (stages, blocks, evict_first) in CONFIGS.items())
    combine = decode_family.render_module(Dtype.BF16, [COMBINE])
    return (f"{combine}\n\nstruct ws_params {{\n  cukiln::TensorMap k_map;\n  cukiln::TensorMap v_map;"
            f"\n{fields}\n}};\n\n{entries}\n")


def build(out_dir: Path) -> None:
    build_cubin(out_dir, _source(), "decode_ws", render.render_headers())


# --- GPU side -------------------------------------------------------------------------------------

def run(cubin_dir: Path, out_path: Path | None, cases=None) -> None:
    import torch

    import cukiln
    from cukiln.decode_api import plan_call, tensor_maps
    from cukiln.generated import dispatch
    from cukiln.tools.decode.bench import HEADS_Q, HEADS_KV
    from cukiln.tools.timing import copy_tbps, median_ms

    torch.cuda.init()
    copy = copy_tbps()
    print(f"1 GiB copy {copy:.3f} TB/s")
    resources = json.loads((cubin_dir / "index.json").read_text())
    functions = load_functions(cubin_dir / "decode_ws.cubin", [f"decode_{n}" for n in CONFIGS] + [COMBINE.name])
    for name, (stages, _, _) in CONFIGS.items():
        allow_shared(functions[f"decode_{name}"], shared_bytes(stages))
    stream = torch.cuda.current_stream().cuda_stream
    c_names, c_fmt = dispatch.DECODE_PARAMS["combine"]
    rows = []
    for b, T in cases or CASES:
        sets, nbytes, sdpa, ref = sdpa_case(b, T)
        print(f"b={b} T={T}: sdpa {sdpa * 1e3:.1f} us ({nbytes / sdpa / 1e9 / copy:.3f}x copy)")
        outs = [torch.empty_like(s[0]) for s in sets]
        tuned = median_ms([lambda s=s, o=o: cukiln.decode_attention(*s, T, out=o) for s, o in zip(sets, outs)])
        print(f"  cukiln.decode_attention (tuned): {tuned * 1e3:8.1f} us {nbytes / tuned / 1e9 / copy:6.3f}x copy "
              f"{sdpa / tuned:5.2f}x sdpa")
        row = {"batch": b, "T": T, "kv_bytes": nbytes, "sdpa_ms": sdpa, "tuned_ms": tuned, "configs": {}}
        # the build's maps of each set's caches (the plan's shapes and strides; any plan of the set will do)
        maps = [tensor_maps(plan_call(*s, T, num_splits=1), s[1].data_ptr(), s[2].data_ptr()) for s in sets]
        for splits in (s for s in SPLITS if T // s >= 4 * KEYS and b * HEADS_KV * s <= 4096):
            work = [(torch.empty(b, HEADS_Q, splits, HEAD_DIM, device="cuda"),
                     torch.empty(b, HEADS_Q, splits, device="cuda")) for _ in sets]
            plans = [plan_call(*s, T, num_splits=splits) for s in sets]
            for name, (stages, _, _) in CONFIGS.items():
                calls = []
                for plan, out, (p_out, p_lse), (k_map, v_map) in zip(plans, outs, work, maps):
                    split = splits > 1
                    given = {**plan.fields, "out": out.data_ptr(), "lse": 0,
                             "partial_out": p_out.data_ptr() if split else 0,
                             "partial_lse": p_lse.data_ptr() if split else 0}
                    values = tuple(given[n] for n in plan.attention.field_names)
                    fmt = "<128s128s" + plan.attention.fmt.lstrip("<")
                    fmt += f"{-struct.calcsize(fmt) % 64}x"
                    steps = [launcher(functions[f"decode_{name}"], fmt, (k_map, v_map) + values,
                                      plan.attention.grid, (THREADS, 1, 1), shared_bytes(stages), stream,
                                      overlap_previous=True)]
                    if split:
                        steps.append(launcher(functions[COMBINE.name], c_fmt, tuple(given[n] for n in c_names),
                                              (b * HEADS_Q, 1, 1), (decode_abi.COMBINE_THREADS, 1, 1), 0, stream,
                                              overlap_previous=True))
                    calls.append(lambda steps=steps: [step() for step in steps])
                row["configs"].setdefault(name, {})[splits] = timed_against_sdpa(
                    calls, outs[0], ref, f"{name} splits {splits:3d}", nbytes, copy, sdpa)
        rows.append(row)
        del sets, outs, maps
        torch.cuda.empty_cache()
    result = {"device": torch.cuda.get_device_name(0), "copy_tbps": copy, "configs": CONFIGS, "resources": resources,
              "rows": rows}
    if out_path:
        out_path.write_text(json.dumps(result, indent=1))
    print("\nbest per case (x copy / x sdpa; the tuned build beside):")
    for r in rows:
        best = {name: min(t.items(), key=lambda kv: kv[1]["ms"]) for name, t in r["configs"].items()}
        print(f"b={r['batch']:4d} T={r['T']:6d} tuned {r['kv_bytes'] / r['tuned_ms'] / 1e9 / copy:.3f}/"
              f"{r['sdpa_ms'] / r['tuned_ms']:.2f} " + " ".join(
                  f"{name}:{s}:{r['kv_bytes'] / t['ms'] / 1e9 / copy:.3f}/{r['sdpa_ms'] / t['ms']:.2f}"
                  for name, (s, t) in best.items()))


if __name__ == "__main__":
    sys.exit(sweep_main(sys.argv[1:], __doc__, build, run))
