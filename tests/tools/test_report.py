"""`cukiln report` on a fixture manifest: per-op summary, rows, sorting, JSON, and every kind of warning."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import io

import pytest
from rich.console import Console

from cukiln.codegen import decode_abi
from cukiln.codegen.ops import tuned_kernels, tuned_settings
from cukiln.core import artifacts
from cukiln.tools import report
from cukiln.tools.decode import report as decode_report
from cukiln.tools.decode.report import decode_rule
from cukiln.tools.rope import report as rope_report
from cukiln.tools.rope.report import thd_rule
from cukiln.tools.tuning import write_tuning
from tests.cubins import elf_file

CUBIN = b"\x7fELF fixture cubin"


def _resources(registers, spill=0):
    return {"registers": registers, "shared_bytes": 16, "stack_bytes": 0, "spill_store_bytes": spill,
            "spill_load_bytes": spill}


def fixture_manifest() -> dict:
    sha = hashlib.sha256(CUBIN).hexdigest()
    return {
        "nvrtc_version": "13.5", "archs": ["sm_80", "sm_90"],
        "modules": {
            "rope_bf16": {"source_sha256": "aa", "cubins": {
                a: {"path": f"cubins/{a}/rope_bf16.cubin", "sha256": sha, "bytes": 4096}
                for a in ("sm_80", "sm_90")}},
            "decode_bf16": {"source_sha256": "bb", "cubins": {
                a: {"path": f"cubins/{a}/decode_bf16.cubin", "sha256": sha, "bytes": 8192}
                for a in ("sm_80", "sm_90")}},
        },
        "variants": [
            {"name": "rope_bf16_dense_half_freqs_s3_v8", "op": "rope", "module": "rope_bf16",
             "axes": {"pairing": "half", "vec": 8},
             "resources": {"sm_80": _resources(96), "sm_90": _resources(90)}},
            {"name": "rope_bf16_dense_interleaved_base_s0_v1", "op": "rope", "module": "rope_bf16",
             "axes": {"pairing": "interleaved", "vec": 1},
             "resources": {"sm_80": _resources(40), "sm_90": _resources(40, spill=4)}},
            {"name": "decode_bf16_d128_s3_v8", "op": "decode", "module": "decode_bf16",
             "axes": {"dtype": "bf16", "head_dim": 128, "vec": 8},
             "resources": {"sm_80": _resources(200), "sm_90": None}},
        ],
    }


@pytest.fixture
def generated(tmp_path):
    """A generated/ folder with the fixture manifest and every cubin it names."""
    manifest = fixture_manifest()
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    for module in manifest["modules"].values():
        for cubin in module["cubins"].values():
            path = tmp_path / cubin["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(CUBIN)
    return tmp_path


def test_rows_filter_and_resources():
    rows = report.rows(fixture_manifest(), "interleaved")
    assert [(r["name"], r["arch"]) for r in rows] == [("rope_bf16_dense_interleaved_base_s0_v1", "sm_80"),
                                                      ("rope_bf16_dense_interleaved_base_s0_v1", "sm_90")]
    assert rows[1]["spill_bytes"] == 8 and rows[1]["cubin_bytes"] == 4096


def test_op_summary_counts_axes_and_worst_resources_per_arch():
    ops = report.op_summary(fixture_manifest())
    assert ops["rope"]["variants"] == 2 and ops["rope"]["modules"] == 1
    assert ops["rope"]["axes"]["pairing"] == {"half": 1, "interleaved": 1}
    assert ops["rope"]["archs"]["sm_80"] == {"variants": 2, "max_registers": 96, "max_shared_bytes": 16,
                                             "spilling": 0}
    assert ops["rope"]["archs"]["sm_90"]["spilling"] == 1
    assert ops["decode"]["archs"]["sm_90"]["variants"] == 0  # no resources for sm_90


def test_warnings_name_spills_missing_archs_and_clean_cubins(generated):
    found = report.warnings(fixture_manifest(), {}, generated)
    kinds = {(w["kind"], w["detail"].split(" ")[0]) for w in found}
    assert ("spill", "rope_bf16_dense_interleaved_base_s0_v1") in kinds
    assert ("missing arch", "decode_bf16_d128_s3_v8") in kinds
    assert not any(w["kind"] in ("missing cubin", "stale cubin", "stale tuning") for w in found)


def test_missing_and_out_of_date_cubins_are_reported(generated):
    (generated / "cubins/sm_90/rope_bf16.cubin").unlink()
    (generated / "cubins/sm_80/decode_bf16.cubin").write_bytes(b"rebuilt elsewhere")
    found = {(w["kind"], w["detail"].split(" ")[0]) for w in report.warnings(fixture_manifest(), {}, generated)}
    assert ("missing cubin", "cubins/sm_90/rope_bf16.cubin") in found
    assert ("stale cubin", "cubins/sm_80/decode_bf16.cubin") in found


def test_tuning_is_stale_once_the_machine_code_it_measured_changes(generated):
    manifest = fixture_manifest()
    tuned, untimed = manifest["variants"][2], {**manifest["variants"][2], "name": "decode_bf16_d64_s3_v8"}
    manifest["variants"].append(untimed)  # a kernel of the same module that the tune does not time
    for entry, code in ((tuned, "k1"), (untimed, "k2")):
        entry["resources"] = {a: {**_resources(200), "text_sha256": f"{code}-{a}"} for a in ("sm_80", "sm_90")}
    (generated / "manifest.json").write_text(json.dumps(manifest))
    write_tuning("sm_90", "decode", {"device": "NVIDIA H200", "date": "2026-11-23", "rule": {}}, root=generated)
    tuning = artifacts.read_tuning(generated)  # the GPU's own table, fingerprinted for its arch
    assert tuning["sm_90-h200"]["decode"]["fingerprint"] == artifacts.tuning_fingerprint(
        manifest, tuned_kernels()["decode"], "sm_90", tuned_settings()["decode"])

    def stale() -> list:
        return [w for w in report.warnings(manifest, tuning, generated) if w["kind"] == "stale tuning"]

    assert not stale()
    manifest["modules"]["decode_bf16"]["source_sha256"] = "cc"  # a source change that compiles to the same code
    untimed["resources"]["sm_90"]["text_sha256"] = "k3"  # the module's other kernels changed
    tuned["resources"]["sm_80"]["text_sha256"] = "k4"  # the timed kernel on another arch than the tuned one
    assert not stale()
    tuned["resources"]["sm_90"]["text_sha256"] = "k5"  # the timed kernel changed
    found = stale()
    assert len(found) == 1 and "decode tuning for sm_90-h200" in found[0]["detail"]


def test_tuning_is_stale_once_a_launch_setting_it_ran_under_changes(generated, monkeypatch):
    """decode's tensor maps' L2 promotion is set at launch, not compiled: a table measured under another value is
    stale though every kernel is as it was."""
    from cukiln.codegen import decode_family

    manifest = fixture_manifest()
    (generated / "manifest.json").write_text(json.dumps(manifest))
    write_tuning("sm_90", "decode", {"device": "NVIDIA H200", "date": "2026-12-03", "rule": {}}, root=generated)
    tuning = artifacts.read_tuning(generated)
    assert tuned_settings()["decode"] == {"ws_l2_promotion": decode_abi.WS_L2_PROMOTION}
    assert not [w for w in report.warnings(manifest, tuning, generated) if w["kind"] == "stale tuning"]
    monkeypatch.setitem(decode_family.FAMILY.tuned_settings, "decode", {"ws_l2_promotion": 256})
    found = [w for w in report.warnings(manifest, tuning, generated) if w["kind"] == "stale tuning"]
    assert len(found) == 1 and "launch settings" in found[0]["detail"]
    assert artifacts.tuning_fingerprint(manifest, tuned_kernels()["decode"], "sm_90") != \
        tuning["sm_90-h200"]["decode"]["fingerprint"]  # the settings are part of it


def test_a_kernels_machine_code_is_its_text_section_alone():
    def code(text: bytes, info: bytes, note: bytes) -> dict[str, bytes]:
        return artifacts.kernel_texts(elf_file({".text.k": text, ".nv.info.k": info, ".note.nv.tkinfo": note}))

    assert code(b"\x01\x02", b"x", b"1") == code(b"\x01\x02", b"y", b"2") == {"k": b"\x01\x02"}  # notes apart
    assert code(b"\x01\x03", b"x", b"1") != code(b"\x01\x02", b"x", b"1")
    with pytest.raises(ValueError, match="ELF"):
        artifacts.kernel_texts(b"not a cubin")


def test_text_and_json_views(generated, monkeypatch, capsys):
    monkeypatch.setattr(report.artifacts, "generated_dir", lambda: generated)
    monkeypatch.setattr(report.artifacts, "read_manifest", lambda root: fixture_manifest())
    monkeypatch.setattr(report.artifacts, "read_tuning", lambda root: {})
    console = Console(file=io.StringIO(), width=1000)
    assert report.main(SimpleNamespace(only=None, sort="registers", json=True, limit=40, console=console)) == 0
    data = json.loads(capsys.readouterr().out)
    assert [v["registers"] for v in data["variants"]][:2] == [200, 96]
    assert set(data["ops"]) == {"rope", "decode"}  # the fake manifest's
    assert set(data["rules"]) == {"rope", "decode"}  # the rules of the families whose variants it holds
    assert {"launch", "thd"} == set(data["rules"]["rope"])
    assert {w["kind"] for w in data["warnings"]} == {"spill", "missing arch"}
    assert report.main(SimpleNamespace(only="rope", sort="spills", json=False, limit=1, console=console)) == 0
    text = console.file.getvalue()
    assert "variants per op and arch" in text and "3 more rows" in text
    assert "rope launch rule" in text and "decode" not in text  # --only holds rope's variants alone, in every part
    console.file = io.StringIO()
    assert report.main(SimpleNamespace(only=None, sort="spills", json=False, limit=1, console=console)) == 0
    text = console.file.getvalue()
    assert "spill (1)" in text and "decode split rule" in text


def test_rules_carry_their_tuning_data_and_the_margin_of_each_choice():
    tuning = {"sm_90": {"decode": {"device": "H100", "date": "2026-11-23", "sms": 132, "rule": {},
                                   "measurements": [{"batch": 1, "T": 8192, "blocks": 8,
                                                     "ms_by_splits": {"1": 0.10, "8": 0.02, "16": 0.021}}]}}}
    rule = decode_rule(tuning)
    point = rule["tuning"]["sm_90"]["points"][0]
    assert point["best_splits"] == 8 and point["runner_up_over_best"] == pytest.approx(1.05)
    assert point["chosen_over_best"] >= 1.0
    thd = thd_rule(artifacts.read_tuning())
    for arch, data in thd["tuning"].items():
        assert thd["grid_max_waste"][arch] == data["rule"]["grid_max_waste"]


def test_thd_rule_fit_stops_at_the_first_real_loss():
    from cukiln.tools.rope.thd import fit_grid_max_waste

    def row(grid_blocks, grid_ms, token_ms):
        return {"grid": {"blocks": grid_blocks, "ms": grid_ms}, "token": {"blocks": 100, "ms": token_ms}}

    rows = [row(100, 1.005, 1.0), row(150, 0.9, 1.0), row(200, 1.2, 1.0), row(400, 0.5, 1.0)]
    assert fit_grid_max_waste(rows) == 1.5  # a tie at 1.0, a win at 1.5, a loss at 2.0 ends it
    assert fit_grid_max_waste([row(100, 1.1, 1.0)]) == 0.0


def test_decode_split_table_keeps_each_points_fastest_count_and_the_rule_picks_it_there():
    from cukiln.tools.decode.tune import TIE, fit_table, rule_choice

    within, beyond = 1 + TIE / 2, 1 + 2 * TIE
    points = [{"blocks": 8, "T": 8192, "resident": 3,
               "ms_by_splits": {"1": 1.0, "2": 0.6, "4": 0.35, "8": 0.2, "16": 0.15, "32": 0.2}},
              {"blocks": 256, "T": 8192, "resident": 3, "ms_by_splits": {"1": 1.0, "2": 1.2, "3": 1.1}},
              {"blocks": 64, "T": 2048, "resident": 3, "ms_by_splits": {"1": 1.2, "2": within, "4": beyond, "8": 1.0}},
              {"blocks": 32, "T": 2048, "resident": 3, "ms_by_splits": {"1": beyond, "8": 1.0}}]
    # the first point: wide wins beyond the tie (the others' files predate the pipelines: narrow only)
    points[0] = {"blocks": 8, "T": 8192, "resident": 3,
                 "ms_by_pipeline": {"narrow": points[0]["ms_by_splits"],
                                    "wide": {"1": 0.9, "2": 0.5, "4": 0.3, "8": 0.12, "16": 0.13}}}
    # the current format: every pipeline; deep within the tie of narrow: not taken
    points[1] = {"blocks": 256, "T": 8192, "resident": 3,
                 "ms_by_pipeline": {"narrow": {"1": 1.0, "2": 1.2}, "deep": {"1": 1 / within, "3": 1.1},
                                    "wide": {"1": 1.5}}}
    rule = fit_table(points)
    # the third point's 2 splits tie with 8 (within TIE): the fewer win; the last's 1 split does not (beyond TIE);
    # both have narrow times only
    assert rule == {"table": [[8, 8192, 2, 16, 16, 8, 16, 16], [32, 2048, 0, 8, 8, 8, 8, 8],
                              [64, 2048, 0, 2, 2, 2, 2, 2], [256, 8192, 0, 1, 1, 1, 1, 1]], "tie": TIE}
    folded = {"table": tuple(tuple(p) for p in rule["table"])}  # as dispatch.py holds it
    assert [rule_choice(p, 132, folded) for p in points] == [(8, "wide"), (1, "narrow"), (2, "narrow"), (8, "narrow")]


def test_decode_split_table_takes_a_later_pipeline_only_beyond_the_tie():
    from cukiln.tools.decode.tune import TIE, fit_table

    def point(blocks, ws_deep_ms):
        return {"blocks": blocks, "T": 8192, "resident": 3,
                "ms_by_pipeline": {"narrow": {"1": 1.2}, "deep": {"1": 1.1}, "wide": {"1": 1.1},
                                   "ws": {"1": 1.0, "2": 1.05}, "ws_deep": {"1": 1.01, "2": ws_deep_ms}}}

    # ws_deep faster within the tie: ws (listed first) keeps the point; beyond it: ws_deep, at its own count
    rule = fit_table([point(8, 1 / (1 + TIE / 2)), point(16, 1 / (1 + 2 * TIE))])
    assert rule["table"] == [[8, 8192, 3, 1, 1, 1, 1, 2], [16, 8192, 4, 1, 1, 1, 1, 2]]


def test_decode_split_ladder_keeps_counts_that_differ_in_effect():
    from cukiln.tools.decode.tune import split_ladder

    assert split_ladder(8, 512) == [1, 2, 3, 4, 8]  # 6 splits share 512 keys out as 4 whole tiles: as 4
    assert split_ladder(1024, 32768) == [1, 2, 3, 4]  # at most 4096 blocks
    assert split_ladder(8, 100) == [1]  # fewer than two splits' worth of keys
    assert split_ladder(8, 512, 128) == [1, 2, 4]  # 128-key tiles: 3 splits take 2 tiles each, as 2


def test_rope_launch_tuning_keeps_the_default_unless_a_candidate_wins_beyond_noise():
    from cukiln.codegen.rope_abi import LAUNCH_DEFAULT
    from cukiln.tools.rope import tune as rope_tune

    default = dict(LAUNCH_DEFAULT)
    cfgs = rope_tune.configs(default)
    assert cfgs[0] == default and len(cfgs) == 1 + sum(len(v) - 1 for v in rope_tune.CANDIDATES.values())
    label = rope_tune.config_label
    narrow, strided = label({**default, "max_vector_bytes": 8}), label({**default, "packed_kernel": False})
    few = label({**default, "min_threads": 32})
    rows = []
    for case in range(4):
        times = {label(c): 1.0 for c in cfgs}
        times[narrow] = 0.9  # narrower vectors 10 % faster where they change the launch
        times[strided] = 1.005  # within noise
        times[few] = 2.0 if case == 0 else 1.0
        rows.append({"times": times, "same_as_default": [few] if case else []})
    choices = {c["choice"]: c for c in rope_tune.score_choices(default, rows)}
    assert choices["max_vector_bytes"]["winner"] == 8
    assert choices["max_vector_bytes"]["margin"] == pytest.approx(1 / 0.9 - 1)
    assert choices["packed_kernel"]["winner"] is True and choices["packed_kernel"]["runner_up"] is False
    # min_threads=32 changed the launch in one case only, where it doubled the time
    cand = {c["value"]: c for c in choices["min_threads"]["candidates"]}
    assert cand[32]["cases"] == 1 and cand[32]["relative_time"] == pytest.approx(2.0)
    assert choices["min_threads"]["winner"] == default["min_threads"]
    # max_threads=128 never changed the launch: it is no runner-up
    rows = [{"times": {label(c): 1.0 for c in cfgs}, "same_as_default": [label({**default, "max_threads": 128})]}]
    rows[0]["times"][label({**default, "max_threads": 64})] = 1.3
    threads = {c["choice"]: c for c in rope_tune.score_choices(default, rows)}["max_threads"]
    assert threads["runner_up"] == 64 and threads["margin"] == pytest.approx(0.3)


def test_report_shows_the_rope_launch_rule_and_its_tuning(monkeypatch, capsys):
    from cukiln.generated import dispatch

    choice = {"choice": "max_vector_bytes", "winner": 16, "runner_up": 8, "margin": 0.04,
              "candidates": [{"value": 16, "cases": 28, "relative_time": 1.0},
                             {"value": 8, "cases": 20, "relative_time": 1.04}]}
    tuning = {"sm_90": {"rope": {"device": "H100", "date": "2026-11-23", "rule": dict(dispatch.ROPE_LAUNCH_DEFAULT),
                                 "choices": [choice]}}}
    data = rope_report.report_rules(tuning)
    assert data["launch"]["tuning"]["sm_90"]["choices"] == [choice]
    assert data["launch"]["default"] == dispatch.ROPE_LAUNCH_DEFAULT
    rope_report.print_rules(Console(width=200), data)
    text = capsys.readouterr().out
    assert "rope launch tuning, sm_90: H100" in text and "4.0 %" in text and "8: 1.040 (20)" in text


def test_decode_and_thd_tuning_tables_show_bandwidth_against_the_same_run_copy(capsys):
    decode = {"device": "H100", "date": "2026-11-23", "sms": 132, "rule": {}, "copy_tbps": 3.0,
              "measurements": [{"batch": 1, "T": 8192, "blocks": 8, "ms_by_splits": {"1": 0.10, "8": 0.02},
                                "best_tbps": 1.7, "best_x_copy": 1.7 / 3.0}]}
    side = {"blocks": 64, "ms": 0.5, "tbps": 2.85, "x_copy": 0.95}
    thd = {"device": "H100", "date": "2026-11-23", "rule": {"grid_max_waste": 1.0}, "copy_tbps": 3.0,
           "measurements": [{"lengths": {"tokens": 8192, "n_seqs": 4}, "token": side,
                             "grid": {**side, "blocks": 128, "x_copy": 0.875}}]}
    plain = {k: v for k, v in side.items() if k != "x_copy"}
    old = {"device": "H100", "date": "2026-11-22", "rule": {"grid_max_waste": 1.0},  # before the ratios
           "measurements": [{"lengths": {"tokens": 8192, "n_seqs": 4}, "token": plain, "grid": plain}]}
    console = Console(width=250)
    decode_report.print_rules(console, decode_rule({"sm_90": {"decode": decode}}))
    rope_report.print_rules(console, rope_report.report_rules({"sm_90": {"rope-thd": thd}, "sm_80": {"rope-thd": old}}))
    text = capsys.readouterr().out
    assert "copy 3.00 TB/s" in text and "1.70" in text and "0.567" in text  # decode: best TB/s and x copy
    assert "0.950" in text and "0.875" in text  # thd: token and grid x copy
    assert thd_rule({"sm_80": {"rope-thd": old}})["tuning"]["sm_80"]["measurements"][0]["grid_x_copy"] is None


def test_the_transformers_bench_counts_the_steps_each_row_agrees_before_its_first_different_token():
    torch = pytest.importorskip("torch")
    from cukiln.tools.decode.transformers_bench import steps_before_first_difference

    same = torch.tensor([[True, True, False, True], [True, True, True, True], [False, True, True, True]])
    assert steps_before_first_difference(same) == [2, 4, 0]
