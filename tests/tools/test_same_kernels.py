"""benchmarks/same_kernels.py: which kernels two builds compiled to the same machine code, over made-up cubins and
manifests."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from cukiln.core import artifacts
from tests.cubins import elf_file

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("same_kernels", ROOT / "benchmarks" / "same_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generated(root: Path, cubins: dict[str, dict[str, bytes]]) -> Path:
    for rel, kernels in cubins.items():
        path = root / artifacts.CUBINS / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(elf_file({f".text.{name}": text for name, text in kernels.items()} | {".nv.info": b"x"}))
    return root


def test_kernel_texts_reads_each_kernels_text_section():
    cubin = elf_file({".text.a": b"\x01", ".nv.info.a": b"i", ".text.b": b"\x02\x03"})
    assert artifacts.kernel_texts(cubin) == {"a": b"\x01", "b": b"\x02\x03"}


def test_kernels_identical_changed_gone_and_new_per_module_and_arch(tmp_path):
    old = _generated(tmp_path / "old", {"sm_90/m.cubin": {"a": b"\x01", "b": b"\x02", "c": b"\x03"},
                                        "sm_80/m.cubin": {"a": b"\x01"}})
    new = _generated(tmp_path / "new", {"sm_90/m.cubin": {"a": b"\x01", "b": b"\x09", "d": b"\x04"},
                                        "sm_80/m.cubin": {"a": b"\x01"}, "sm_80/n.cubin": {"e": b"\x05"}})
    rows = {(r["arch"], r["module"]): r for r in _tool().compare(old, new, None)}
    assert rows["sm_90", "m"] == {"arch": "sm_90", "module": "m", "identical": ["a"], "changed": ["b"],
                                  "gone": ["c"], "new": ["d"]}
    assert rows["sm_80", "m"]["identical"] == ["a"] and rows["sm_80", "n"]["new"] == ["e"]
    only = _tool().compare(old, new, "^b$")
    assert [(r["module"], r["changed"]) for r in only] == [("m", ["b"])]


def test_a_manifest_gives_the_same_rows_as_the_cubins_it_describes(tmp_path):
    old = _generated(tmp_path / "old", {"sm_90/m.cubin": {"a": b"\x01", "b": b"\x02"}})
    new = _generated(tmp_path / "new", {"sm_90/m.cubin": {"a": b"\x01", "b": b"\x09"}})

    def manifest(folder: Path) -> Path:
        texts = artifacts.kernel_texts((folder / artifacts.CUBINS / "sm_90/m.cubin").read_bytes())
        entries = [{"name": k, "module": "m", "resources": {"sm_90": {"text_sha256": hashlib.sha256(t).hexdigest()},
                                                             "sm_80": None}} for k, t in texts.items()]
        path = folder / "manifest.json"
        path.write_text(json.dumps({"schema": 3, "variants": entries}))
        return path

    tool = _tool()
    assert tool.compare(manifest(old), manifest(new), None) == tool.compare(old, new, None)
    assert tool.compare(manifest(old), new, None)[0]["changed"] == ["b"]  # a manifest against a folder


def test_a_manifest_without_machine_code_is_refused_with_a_reason(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": 2, "variants": []}))
    with pytest.raises(SystemExit, match="schema 2"):
        _tool().compare(path, path, None)
