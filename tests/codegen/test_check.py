"""The drift check (`cukiln build --check`) and the checked-in manifest."""

from __future__ import annotations

import json
import shutil

from rich.console import Console

from cukiln.codegen import check, render
from cukiln.codegen.ops import all_variants
from cukiln.core import artifacts
from cukiln.core.archs import DEFAULT_ARCHS

ALL_VARIANTS = all_variants()


def test_drift_check_passes_on_the_checked_in_tree_and_fails_on_a_change(tmp_path):
    console = Console(file=open("/dev/null", "w"))
    assert check.check(artifacts.generated_dir(), console) == 0, "generated/ is stale: run `cukiln build`"
    copy = tmp_path / "generated"
    shutil.copytree(artifacts.generated_dir(), copy, ignore=shutil.ignore_patterns("cubins", "__pycache__"))
    assert check.check(copy, console) == 0
    (copy / "tuning" / "sm_90.json").unlink(missing_ok=True)  # tuning data feeds dispatch.py too
    if (artifacts.generated_dir() / "tuning" / "sm_90.json").exists():
        assert check.check(copy, console) == 1
        shutil.copy(artifacts.generated_dir() / "tuning" / "sm_90.json", copy / "tuning" / "sm_90.json")
    (copy / "rope_bf16.cu").write_text((copy / "rope_bf16.cu").read_text() + "// edited\n")
    assert check.check(copy, console) == 1
    (copy / "rope_bf16.cu").write_text(render.render_modules(ALL_VARIANTS)["rope_bf16"])
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["variants"] = manifest["variants"][1:]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert check.check(copy, console) == 1

def test_checked_in_manifest_records_resources_without_spills():
    manifest = artifacts.read_manifest()
    assert manifest["archs"] == list(DEFAULT_ARCHS)  # exactly what a plain build makes on a machine without a GPU
    assert len(manifest["variants"]) == len(ALL_VARIANTS)
    for entry in manifest["variants"]:
        for arch, res in entry["resources"].items():
            assert res is not None, f"{entry['name']} has no resources for {arch}"
            assert res["spill_store_bytes"] + res["spill_load_bytes"] == 0, (entry["name"], arch)
