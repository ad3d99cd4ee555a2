"""Split-KV merge sweep: the combine kernel against the cluster merge, at every split count.

    python benchmarks/studies/decode_merge_sweep.py [--out F] [--cases 1x8192,8x512]     # GPU (sm_90 on)

Runs the built kernels (generated/cubins) through the runtime's own plans and launches: for each case
(the bench grid of `cukiln bench decode`: bf16, h_q 32, h_kv 8, d 128) and split count, once with the
splits of each (row, KV head) merged in a thread-block cluster (at most decode_plan.MAX_CLUSTER_SPLITS),
once so with more shared memory asked than two blocks can share (one block per multiprocessor: "spread")
and once with partial results in global memory merged by the combine kernel; timed as bench times (CUDA
events, median, rotating buffers) beside torch SDPA on the same inputs, each result compared with SDPA's
(further than 0.02: flagged WRONG). The last table names the split count the tuned rule picks.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raw_launch import sdpa_case, timed_against_sdpa

SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def _timed_calls(plans, outs):
    """One zero-argument callable per rotating input set, making the plan's launches as the runtime does."""
    from cukiln.decode_api import _launch

    calls = []
    for plan, (out, tensors) in zip(plans, outs):
        calls.append(lambda plan=plan, out=out, tensors=tensors: _launch(plan, out, None, tensors))
    return calls


def run(out_path: Path | None, cases) -> None:
    import dataclasses

    import torch

    from cukiln.decode_api import plan_call
    from cukiln.decode_plan import MAX_CLUSTER_SPLITS, plan_decode
    from cukiln.generated import dispatch
    from cukiln.loader import KERNELS
    from cukiln.tensors import from_torch
    from cukiln.tools.decode import BENCH_GRID, HEADS_KV
    from cukiln.tools.timing import copy_tbps, run_metadata

    torch.cuda.init()
    copy = copy_tbps()
    sms, arch = KERNELS.sm_count(0), KERNELS.arch(0)
    # more than half a multiprocessor's shared memory (less the driver's share of two blocks): one block each
    alone = KERNELS.shared_per_sm(0) // 2 - 1024 + 16
    threads = 32 * dispatch.DECODE_WARPS
    print(f"1 GiB copy {copy:.3f} TB/s, {sms} SMs, {arch}")

    def resident(module, symbol, shared):
        return KERNELS.resident_blocks(0, module, symbol, threads, shared)

    def clusters(module, symbol, shared, cluster):
        return KERNELS.active_clusters(0, module, symbol, threads, shared, cluster)

    rows = []
    for b, T in cases or BENCH_GRID:
        sets, nbytes, sdpa, ref = sdpa_case(b, T)
        rule = plan_call(*sets[0], T).num_splits  # what the runtime picks without num_splits=
        print(f"b={b} T={T}: sdpa {sdpa * 1e3:.1f} us ({nbytes / sdpa / 1e9 / copy:.3f}x copy), rule: {rule} splits")
        row = {"batch": b, "T": T, "kv_bytes": nbytes, "sdpa_ms": sdpa, "rule_splits": rule, "merges": {}}
        outs = [(torch.empty_like(s[0]), s) for s in sets]
        for splits in [s for s in SPLITS if s == 1 or (T // s >= 64 and b * HEADS_KV * s <= 4096)]:
            for merge in ("cluster", "spread", "kernel") if splits > 1 else ("one pass",):
                clustered = merge in ("cluster", "spread")
                if clustered and splits > MAX_CLUSTER_SPLITS:
                    continue
                plans = [plan_decode(from_torch(q, "q"), from_torch(k, "k"), from_torch(v, "v"), T, num_splits=splits,
                                     sms=sms, arch=arch, resident=resident,
                                     active_clusters=clusters if clustered else (lambda *args: 0))
                         for q, k, v in sets]
                if merge == "spread":
                    plans = [dataclasses.replace(p, attention=dataclasses.replace(p.attention, shared=alone))
                             for p in plans]
                if clustered and plans[0].attention.cluster != splits:
                    print(f"  {splits} splits: no cluster of {splits} fits")
                    continue
                row["merges"].setdefault(merge, {})[splits] = timed_against_sdpa(
                    _timed_calls(plans, outs), outs[0][0], ref, f"{merge:8s} splits {splits:3d}", nbytes, copy, sdpa)
        rows.append(row)
        del sets, outs
        torch.cuda.empty_cache()
    result = {**run_metadata("decode merge sweep", "python benchmarks/studies/decode_merge_sweep.py"), "copy_tbps": copy,
              "rows": rows}
    if out_path:
        out_path.write_text(json.dumps(result, indent=1))
    print("\nper case: the rule's split count with each merge, and the best (splits: x sdpa)")
    for r in rows:
        cells = []
        for merge, times in r["merges"].items():
            at_rule = times.get(r["rule_splits"])
            best_s, best = min(times.items(), key=lambda kv: kv[1]["ms"])
            cells.append(f"{merge} rule {r['sdpa_ms'] / at_rule['ms']:.2f} best {best_s}:{r['sdpa_ms'] / best['ms']:.2f}"
                         if at_rule else f"{merge} best {best_s}:{r['sdpa_ms'] / best['ms']:.2f}")
        print(f"b={r['batch']:4d} T={r['T']:6d} rule {r['rule_splits']:3d}: " + " | ".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", help="only these cases, e.g. 1x8192,8x512")
    args = parser.parse_args()
    cases = [tuple(int(n) for n in c.split("x")) for c in args.cases.split(",")] if args.cases else None
    run(args.out, cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
