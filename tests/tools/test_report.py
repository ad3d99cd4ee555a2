"""`cukiln report` on a fixture manifest: rows, filtering, sorting, JSON."""

from __future__ import annotations

import json
from types import SimpleNamespace

from cukiln.tools import report

FIXTURE = {
    "nvrtc_version": "13.5", "archs": ["sm_90"],
    "modules": {"rope_bf16": {"cubins": {"sm_90": {"bytes": 4096, "compile_seconds": 2.5}}}},
    "variants": [
        {"name": "rope_fwd_bf16_dense_half_freqs_s3_v8", "module": "rope_bf16",
         "resources": {"sm_90": {"registers": 96, "shared_bytes": 0, "stack_bytes": 0,
                                 "spill_store_bytes": 0, "spill_load_bytes": 0}}},
        {"name": "rope_bwd_bf16_dense_half_base_s0_v1", "module": "rope_bf16",
         "resources": {"sm_90": {"registers": 40, "shared_bytes": 16, "stack_bytes": 8,
                                 "spill_store_bytes": 4, "spill_load_bytes": 4}}},
    ],
}


def test_rows_filter_and_resources():
    rows = report.rows(FIXTURE, "bwd")
    assert [r["name"] for r in rows] == ["rope_bwd_bf16_dense_half_base_s0_v1"]
    assert rows[0]["spill_bytes"] == 8 and rows[0]["cubin_bytes"] == 4096


def test_sorting_and_json_output(monkeypatch, capsys):
    monkeypatch.setattr(report.emit, "read_manifest", lambda: FIXTURE)
    assert report.main(SimpleNamespace(only=None, sort="registers", json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert [v["registers"] for v in data["variants"]] == [96, 40]
    assert report.main(SimpleNamespace(only=None, sort="spills", json=False)) == 0
    text = capsys.readouterr().out
    assert "1 variants spill" in text and "rope_bwd_bf16_dense_half_base_s0_v1" in text
