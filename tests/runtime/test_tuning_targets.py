"""Tuned rules per GPU on the CPU: a GPU's tuning target from its arch and name, its own table taken before its arch's,
its arch's before the default, `cukiln tune`'s file named for the GPU it ran on, and the report naming the table each
rule takes."""

from __future__ import annotations

import json

from cukiln.core import artifacts
from cukiln.core.archs import target_arch, tuned, tuned_source, tuning_target
from cukiln.decode_plan import split_rule
from cukiln.generated import dispatch
from cukiln.tools.report import tuning_tables
from cukiln.tools.tuning import write_tuning


def test_a_target_is_the_arch_and_a_slug_of_the_device_name():
    assert tuning_target("sm_90", "NVIDIA H200") == "sm_90-h200"
    assert tuning_target("sm_90", "NVIDIA H100 80GB HBM3") == "sm_90-h100-80gb-hbm3"
    assert tuning_target("sm_80", "NVIDIA A100-SXM4-80GB") == "sm_80-a100-sxm4-80gb"
    assert tuning_target("sm_90", "") == "sm_90"
    assert target_arch("sm_90-h200") == "sm_90" and target_arch("sm_90") == "sm_90"


def test_a_gpu_takes_its_own_table_then_its_archs_then_the_default():
    rules = {"sm_90": "arch's", "sm_90-h200": "h200's"}
    assert tuned(rules, "sm_90-h200", "default") == "h200's"
    assert tuned(rules, "sm_90-h100-80gb-hbm3", "default") == "arch's"
    assert tuned(rules, "sm_100-b200", "default") == "default"
    assert tuned(rules, None, "default") == "default"
    assert tuned_source(rules, "sm_90-h200") == "sm_90-h200" and tuned_source(rules, "sm_90-x") == "sm_90"
    assert tuned_source(rules, "sm_80-a100") is None


def test_the_decode_split_rule_of_a_gpu_without_a_table_is_its_archs():
    assert split_rule("sm_90-some-new-gpu") == dispatch.DECODE_SPLIT.get("sm_90", dispatch.DECODE_SPLIT_DEFAULT)
    assert split_rule("sm_75-old") == dispatch.DECODE_SPLIT_DEFAULT


def test_fp8_caches_and_paged_pools_take_their_own_table_where_measured_else_the_16_bit_one(monkeypatch):
    fixed, fp8, paged = ({"table": ((8, 512, pipeline) + (splits,) * 5,)} for pipeline, splits in ((0, 1), (2, 2), (4, 3)))
    monkeypatch.setattr(dispatch, "DECODE_SPLIT", {"sm_90": fixed})
    monkeypatch.setattr(dispatch, "DECODE_SPLIT_FP8", {"sm_90-h200": fp8})
    monkeypatch.setattr(dispatch, "DECODE_SPLIT_PAGED", {"sm_90-h200": paged})
    assert split_rule("sm_90-h200") is fixed
    assert split_rule("sm_90-h200", "e4m3") is fp8 and split_rule("sm_90-h200", "e4m3", "paged") is fp8
    assert split_rule("sm_90-h200", "same", "paged") is paged
    # another sm_90 GPU has neither: the arch's 16-bit table
    assert split_rule("sm_90-h100", "e4m3") is fixed and split_rule("sm_90-h100", "same", "paged") is fixed


def test_tune_writes_the_table_of_the_gpu_it_ran_on(tmp_path):
    (tmp_path / artifacts.MANIFEST).write_text(json.dumps({"modules": {}}))
    path = write_tuning("sm_90", "decode", {"device": "NVIDIA H200", "rule": {"table": []}}, root=tmp_path)
    assert path.name == "sm_90-h200.json"
    stored = artifacts.read_tuning(tmp_path)
    assert list(stored) == ["sm_90-h200"] and stored["sm_90-h200"]["decode"]["fingerprint"]


def test_the_report_names_the_table_each_rule_takes():
    tuning = {"sm_90": {"decode": {}, "rope": {}}, "sm_90-h200": {"decode": {}}}
    t = tuning_tables(tuning, "sm_90-h200")
    assert t["tables"] == {"decode": ["sm_90", "sm_90-h200"], "rope": ["sm_90"]}
    assert t["gpu_uses"] == {"decode": "sm_90-h200", "rope": "sm_90"}
    assert tuning_tables(tuning, "sm_80-a100")["gpu_uses"] == {"decode": "default", "rope": "default"}
    assert tuning_tables(tuning, None)["gpu_uses"] == {}
