"""Benchmark plots from result JSON alone: the series drawn and a PNG written."""

from __future__ import annotations

import json

import pytest

from cukiln.tools import plots

RESULT = {
    "benchmark": "decode", "device": "fixture GPU", "date": "2026-11-23", "copy_tbps": 3.0, "others": [],
    "cases": [
        {"batch": 1, "T": 8192, "cukiln": {"tbps": 2.5}, "torch_sdpa": {"tbps": 1.6}},
        {"batch": 8, "T": 512, "cukiln": {"tbps": 0.7}, "torch_sdpa": {"tbps": 1.5}},
    ],
}


def test_series_label_each_case_and_keep_the_contenders_present():
    labels, data = plots.series(RESULT)
    assert labels == ["b1 T8k", "b8 T512"]
    assert data == {"cukiln": [2.5, 0.7], "torch_sdpa": [1.6, 1.5]}


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = plots.plot(RESULT, tmp_path / "decode.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_command_rejects_a_file_that_is_not_a_bench_result(tmp_path):
    pytest.importorskip("matplotlib")
    from cukiln.tools import cli

    bad = tmp_path / "tuning.json"
    bad.write_text(json.dumps({"benchmark": "tune rope-thd"}))
    assert cli.main(["plot", str(bad)]) == 2
    good = tmp_path / "decode.json"
    good.write_text(json.dumps(RESULT))
    assert cli.main(["plot", str(good)]) == 0 and (tmp_path / "decode.png").exists()
