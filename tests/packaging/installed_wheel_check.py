"""Run with an installed cukiln wheel, from outside the source tree, on a GPU: rope and decode attention
from the wheel's own cubins and a torch op through the native hot path the wheel ships, with NVRTC hidden (so
nothing can be compiled) and an empty compile cache.

    python -I tests/packaging/installed_wheel_check.py      # -I: the source tree stays off sys.path

tests/packaging/run_wheel_check.sh builds the clean environment and runs this. Exits non-zero on any
failure; prints one line per check.
"""

from __future__ import annotations

import importlib
import importlib.abc
import os
import sys
import tempfile

HIDDEN = ("cuda.bindings.nvrtc", "nvidia.cuda_nvrtc", "cuda.nvrtc")


class HideNvrtc(importlib.abc.MetaPathFinder):
    """Any import of NVRTC fails, as on a machine without it."""

    def find_spec(self, name, path=None, target=None):
        if name in HIDDEN or name.startswith(tuple(h + "." for h in HIDDEN)):
            raise ImportError(f"{name} is hidden for the wheel check")
        return None


def main() -> None:
    sys.meta_path.insert(0, HideNvrtc())
    cache = tempfile.mkdtemp(prefix="cukiln-wheel-cache-")
    os.environ["CUKILN_CACHE_DIR"] = cache
    import torch

    import cukiln

    print(f"cukiln from {os.path.dirname(cukiln.__file__)}")
    assert "site-packages" in cukiln.__file__, "cukiln must come from the installed wheel"
    try:
        importlib.import_module("cuda.bindings.nvrtc")
    except ImportError:
        print("NVRTC: not importable")
    else:
        raise AssertionError("NVRTC is importable: the check would not show that the wheel needs none")

    torch.manual_seed(0)
    x = torch.randn(64, 2, 8, 128, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(64, 1, 1, 128, device="cuda") * 10
    for backward in (False, True):
        got = cukiln.rope(x, freqs=freqs, backward=backward).double()
        want = cukiln.reference.rope(x, freqs=freqs, backward=backward)
        err = (got - want).abs().max().item()
        assert err < 0.05, err
        print(f"rope sbhd bf16 {'backward' if backward else 'forward'}: max error {err:.2e}")
    t = torch.randn(100, 4, 64, device="cuda", dtype=torch.float16)
    cu = torch.tensor([0, 30, 100], dtype=torch.int32, device="cuda")
    f = torch.rand(70, 1, 1, 64, device="cuda")
    err = (cukiln.rope(t, freqs=f, layout="thd", cu_seqlens=cu).double()
           - cukiln.reference.rope(t, freqs=f, layout="thd", cu_seqlens=cu)).abs().max().item()
    assert err < 0.01, err
    print(f"rope thd fp16: max error {err:.2e}")

    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 4096, 128, device="cuda", dtype=torch.bfloat16)[:, :, :1000]
    v = torch.randn_like(k)
    lens = torch.tensor([1000, 321], dtype=torch.int32, device="cuda")
    got = cukiln.decode_attention(q, k, v, lens).double()
    want = cukiln.reference.decode_attention(q, k, v, lens)
    err = (got - want).abs().max().item()
    assert err < 0.02, err
    print(f"decode_attention bf16 d=128 GQA 4, cache slices: max error {err:.2e}")
    # the torch op, eagerly: its per-call work runs in the native hot path the wheel ships for this torch
    import cukiln.torch  # noqa: F401  (registers the ops)
    from cukiln import native

    loaded = native.module()
    assert loaded is not None, f"no native hot path: {native.off_reason()}"
    assert os.path.dirname(cukiln.__file__) in loaded.__file__, f"native hot path not the wheel's: {loaded.__file__}"
    got = cukiln.torch.rope(x, freqs=freqs).double()
    err = (got - cukiln.reference.rope(x, freqs=freqs)).abs().max().item()
    assert err < 0.05, err
    print(f"cukiln.torch.rope through the wheel's native hot path: max error {err:.2e}")
    assert not os.listdir(cache), f"something was compiled: {os.listdir(cache)}"
    print("compile cache still empty: every kernel came from the wheel")


if __name__ == "__main__":
    main()
