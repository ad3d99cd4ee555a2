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


def test_thd_rule_fit_stops_at_the_first_real_loss():
    from cukiln.tools.thd import fit_grid_max_waste

    def row(grid_blocks, grid_ms, token_ms):
        return {"grid": {"blocks": grid_blocks, "ms": grid_ms}, "token": {"blocks": 100, "ms": token_ms}}

    rows = [row(100, 1.005, 1.0), row(150, 0.9, 1.0), row(200, 1.2, 1.0), row(400, 0.5, 1.0)]
    assert fit_grid_max_waste(rows) == 1.5  # a tie at 1.0, a win at 1.5, a loss at 2.0 ends it
    assert fit_grid_max_waste([row(100, 1.1, 1.0)]) == 0.0


def test_report_shows_the_thd_rule_and_its_data():
    from cukiln.tools import report

    rule = report.thd_rule()
    assert set(rule) == {"grid_max_waste", "default", "tuning"}
    for arch, data in rule["tuning"].items():
        assert rule["grid_max_waste"][arch] == data["rule"]["grid_max_waste"]
        assert data["measurements"] and {"token_us", "grid_us"} <= set(data["measurements"][0])
