"""Cubin loading failures, simulated on the CPU: what a user sees when the driver cannot take a cubin, and
when no cubin exists for the GPU's arch and NVRTC is not importable."""

from __future__ import annotations

import builtins
import json

import pytest

pytest.importorskip("cuda.bindings")

from cuda.bindings import driver  # noqa: E402

from cukiln import loader  # noqa: E402

OK = driver.CUresult.CUDA_SUCCESS


@pytest.fixture
def generated(tmp_path, monkeypatch):
    (tmp_path / "cubins" / "sm_90").mkdir(parents=True)
    (tmp_path / "cubins" / "sm_90" / "decode_bf16.cubin").write_bytes(b"\x7fELF built by a newer toolkit")
    manifest = {"modules": {"decode_bf16": {"cubins": {"sm_90": {"nvrtc_version": "13.5"}}}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(loader, "generated_dir", lambda: tmp_path)
    cache = loader.KernelCache()
    monkeypatch.setattr(cache, "arch", lambda device: "sm_90")
    return cache


def test_a_cubin_newer_than_the_driver_names_both_versions(generated, monkeypatch):
    monkeypatch.setattr(loader.driver, "cuModuleLoadData",
                        lambda data: (driver.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, None))
    monkeypatch.setattr(loader.driver, "cuDriverGetVersion", lambda: (OK, 12040))
    monkeypatch.setattr(loader.driver, "cuGetErrorName", lambda err: (OK, err.name.encode()))
    with pytest.raises(loader.CudaError) as info:
        generated._load_module(0, "decode_bf16")
    message = str(info.value)
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in message
    assert "NVRTC 13.5" in message and "CUDA 12.4" in message and "cukiln build --arch sm_90" in message


def test_a_missing_arch_without_nvrtc_names_the_built_archs_and_the_command(generated, monkeypatch):
    real_import = builtins.__import__

    def no_codegen(name, *args, **kwargs):
        if name.startswith("cukiln.codegen"):
            raise ImportError("No module named 'cuda.bindings.nvrtc'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(generated, "arch", lambda device: "sm_120")
    monkeypatch.setattr(builtins, "__import__", no_codegen)
    with pytest.raises(loader.CudaError) as info:
        generated._load_module(0, "decode_bf16")
    message = str(info.value)
    assert "sm_120" in message and "built archs: sm_90" in message and "cukiln build --arch sm_120" in message
