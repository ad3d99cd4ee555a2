"""A GPU whose arch has no cubin: the runtime compiles the module with NVRTC into the user cache, says so
once on stderr, and the kernels are right. Simulated on the GPU here by a generated/ copy without this
GPU's cubins, in a fresh process (the runtime caches loaded modules per process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import sys
    import time
    from pathlib import Path

    import torch

    import cukiln
    from cukiln import loader

    loader.generated_dir = lambda: Path(sys.argv[1])
    started = time.perf_counter()
    x = torch.randn(33, 2, 4, 64, device="cuda")
    freqs = torch.rand(40, 1, 1, 64, device="cuda")
    for backward in (False, True):
        err = (cukiln.rope(x, freqs=freqs, backward=backward).double()
               - cukiln.reference.rope(x, freqs=freqs, backward=backward)).abs().max().item()
        assert err < 1e-5, err
    print(f"rope fp32 right after {time.perf_counter() - started:.0f} s", flush=True)
    q = torch.randn(2, 4, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(2, 1, 300, 64, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    lens = torch.tensor([300, 17], dtype=torch.int32, device="cuda")
    err = (cukiln.decode_attention(q, k, v, lens).double()
           - cukiln.reference.decode_attention(q, k, v, lens)).abs().max().item()
    assert err < 2e-3, err
    print(f"decode fp16 right after {time.perf_counter() - started:.0f} s", flush=True)
    print("rope fp32 and decode fp16 correct from JIT-compiled modules")
''')


@pytest.mark.gpu
def test_a_missing_arch_is_compiled_into_the_user_cache_and_runs(tmp_path):
    import torch

    from cukiln.core.artifacts import generated_dir

    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    copy = tmp_path / "generated"
    shutil.copytree(generated_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(copy / "cubins" / arch, ignore_errors=True)
    cache = tmp_path / "cache"
    env = {**os.environ, "CUKILN_CACHE_DIR": str(cache)}
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(copy)], capture_output=True, text=True, env=env,
                              timeout=300)
    except subprocess.TimeoutExpired as e:  # show how far it got
        pytest.fail(f"timed out; stdout: {e.stdout!r}; stderr: {e.stderr!r}")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "correct from JIT-compiled modules" in done.stdout
    notes = [line for line in done.stderr.splitlines() if "compiling it now with NVRTC" in line]
    assert len(notes) == 2 and all(arch in n for n in notes), done.stderr  # once per module: rope_fp32, decode_fp16
    assert sorted(p.suffix for p in cache.glob("*.cubin")) == [".cubin", ".cubin"]
    assert not (copy / "cubins" / arch).exists()  # the cache holds them, not the installation
