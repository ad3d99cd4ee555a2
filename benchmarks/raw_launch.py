"""Kernel sweeps' launcher and command line: load sweep cubins (built apart from generated/), launch their
kernels raw."""

from __future__ import annotations

import argparse
import ctypes
import re
import struct
from pathlib import Path


def load_functions(cubin: Path, symbols) -> dict:
    """symbol -> CUfunction from ``cubin``, loaded into device 0's primary context (made current)."""
    from cuda.bindings import driver

    from cukiln.driver import check
    from cukiln.loader import KERNELS

    ctx, _ = KERNELS.context(0)
    check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    module = check(driver.cuModuleLoadData(cubin.read_bytes()), "cuModuleLoadData")
    return {s: check(driver.cuModuleGetFunction(module, s.encode()), "cuModuleGetFunction") for s in symbols}


def allow_shared(fn, nbytes: int) -> None:
    """Opt ``fn`` in to ``nbytes`` of dynamic shared memory (needed above 48 KB)."""
    from cuda.bindings import driver

    from cukiln.driver import check

    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(driver.cuFuncSetAttribute(fn, attr, nbytes), "cuFuncSetAttribute")


def launcher(fn, fmt: str, values, grid, block, shared: int, stream: int, overlap_previous: bool = False,
             cluster: int = 1):
    """A zero-argument callable launching ``fn`` with its struct parameter packed once, here
    (``overlap_previous``: a programmatic launch, as cukiln.launch makes it, in clusters of ``cluster``)."""
    from cuda.bindings import driver

    from cukiln.driver import launch_config

    params = ctypes.create_string_buffer(struct.pack(fmt, *values))
    pointers = (ctypes.c_void_p * 1)(ctypes.addressof(params))
    if overlap_previous:
        config = launch_config(grid, block, shared, cluster)
    else:
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = shared
    config.hStream = driver.CUstream(stream)

    def call() -> None:
        (err,) = driver.cuLaunchKernelEx(config, fn, ctypes.addressof(pointers), 0)
        assert err == driver.CUresult.CUDA_SUCCESS, err

    call.keep = (params, pointers, config)  # alive as long as the callable
    return call


def build_cubin(out_dir: Path, source: str, name: str, headers: dict) -> None:
    """Compile ``source`` for sm_90 into DIR/<name>.cubin, its kernels' resources into DIR/index.json, and print
    them (the one-cubin sweeps' build step)."""
    import json

    from cukiln.codegen.nvrtc import compile_cubin, parse_ptxas_log

    out_dir.mkdir(parents=True, exist_ok=True)
    cubin, log, seconds = compile_cubin(source, name, "sm_90", headers)
    (out_dir / f"{name}.cubin").write_bytes(cubin)
    resources = {k: vars(v) for k, v in parse_ptxas_log(log).items()}
    (out_dir / "index.json").write_text(json.dumps(resources, indent=1))
    for kernel, r in resources.items():
        print(f"{kernel}: {r['registers']} registers, {r['spill_store_bytes'] + r['spill_load_bytes']} spill bytes")
    print(f"compiled in {seconds:.1f} s")


def sdpa_case(b: int, T: int):
    """A decode sweep case (the bench's shapes): rotating input sets, K+V bytes, torch SDPA's time on them
    and its output on the first set (fp32): (sets, nbytes, sdpa_ms, ref)."""
    from cukiln.tools.decode.bench import inputs, kv_bytes, torch_sdpa
    from cukiln.tools.timing import median_ms, rotating_sets

    nbytes = kv_bytes(b, T)
    sets = rotating_sets(lambda: inputs(b, T), nbytes)
    sdpa = median_ms([lambda s=s: torch_sdpa(*s) for s in sets])
    return sets, nbytes, sdpa, torch_sdpa(*sets[0]).float()


def timed_against_sdpa(calls, out, ref, label: str, nbytes: int, copy_tbps: float, sdpa_ms: float) -> dict:
    """Run ``calls[0]`` once into ``out`` (NaN-poisoned first) and compare with SDPA's ``ref``, time every
    call (rotating inputs), print one line (flagged WRONG further than 0.02 from SDPA): {ms, diff}."""
    from cukiln.tools.timing import median_ms

    out.fill_(float("nan"))
    calls[0]()
    err = (out.float() - ref).abs().max().item()
    ms = median_ms(calls)
    flag = "  WRONG" if not err < 0.02 else ""
    print(f"  {label}: {ms * 1e3:8.1f} us {nbytes / ms / 1e9 / copy_tbps:6.3f}x copy {sdpa_ms / ms:5.2f}x sdpa{flag}")
    return {"ms": ms, "max_abs_diff_vs_sdpa": err}


def selected(configs: dict, only: str) -> dict:
    """The configs whose name matches ``only`` (a regex; empty: every one): what a sweep's build takes of --only."""
    return {name: cfg for name, cfg in configs.items() if re.search(only, name)}


def sweep_main(argv: list[str], doc: str, build, run, run_options: dict[str, dict] | None = None) -> int:
    """The sweeps' two-step command line: `build DIR` on the CPU machine, `run DIR [--out JSON]` on the GPU.
    ``run_options``: a sweep's own options of its run step (flag -> argparse keywords), each passed to ``run`` as a
    keyword argument (its dest) when given."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("build", "run"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", help="run only these cases, e.g. 1x8192,8x512 (sweeps that take it)")
    parser.add_argument("--only", help="build only the configs whose name matches this regex (sweeps that take it)")
    own = [parser.add_argument(flag, **kwargs).dest for flag, kwargs in (run_options or {}).items()]
    args = parser.parse_args(argv)
    if args.step == "build":
        build(args.dir, **({"only": args.only} if args.only else {}))
        return 0
    extra = {dest: getattr(args, dest) for dest in own if getattr(args, dest) is not None}
    if args.cases:
        extra["cases"] = [tuple(int(n) for n in c.split("x")) for c in args.cases.split(",")]
    run(args.dir, args.out, **extra)
    return 0
