"""The comparison that `cukiln verify` and the GPU tests share, on CPU tensors; how entries map to checks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cukiln.decode_plan import MAX_CLUSTER_SPLITS  # noqa: E402
from cukiln.tools import verify  # noqa: E402
from cukiln.tools.decode import checks as decode_checks  # noqa: E402


def test_exact_and_within_two_ulp_pass_three_ulp_fails():
    ref = torch.linspace(1.0, 2.0, 101, dtype=torch.float64)  # bf16 ulp here is 2**-7
    out = ref.to(torch.bfloat16)
    assert verify.compare(out, ref) is None
    assert verify.compare((ref + 1.5 * 2**-7).to(torch.bfloat16), ref) is None
    problem = verify.compare((ref + 3 * 2**-7).to(torch.bfloat16), ref)
    assert problem is not None and "beyond 2 ulp" in problem


def test_nan_outputs_and_shapes_are_named():
    ref = torch.ones(4, dtype=torch.float64)
    out = torch.ones(4, dtype=torch.float16)
    out[2] = float("nan")
    assert "unwritten or NaN" in verify.compare(out, ref)
    assert "shape" in verify.compare(out[:3], ref)


def test_fp32_bound_and_the_fp32_allowance_for_small_elements():
    ref = torch.tensor([1.0, 1.0], dtype=torch.float64)
    assert verify.compare(torch.tensor([1.0, 1.0 + 5e-6]), ref) is None
    assert "> 1e-5" in verify.compare(torch.tensor([1.0, 1.0 + 5e-5]), ref)
    small = torch.tensor([4.0, 1e-4], dtype=torch.float64)  # an element far below the largest
    off = (small + torch.tensor([0.0, 16 * 2**-20])).to(torch.float16)  # 16 units of 2**-22 x max|ref|
    assert verify.compare(off, small) is not None
    assert verify.compare(off, small, fp32_units=decode_checks.DECODE_FP32_UNITS) is None


def test_a_combine_kernel_is_checked_through_a_split_launch_that_uses_it(monkeypatch):
    seen = []
    monkeypatch.setattr(decode_checks, "check_decode_variant", lambda axes, name, splits: seen.append((axes, name, splits)))
    verify.check_entry({"op": "decode_combine", "name": "decode_combine_fp16_d96",
                        "axes": {"dtype": "fp16", "head_dim": 96}})
    # more splits than a cluster holds, so that sm_90 and later GPUs run the combine kernel too
    (splits,) = seen[0][2]
    assert seen[0][1] == "decode_fp16_d96_s3_v8" and splits > MAX_CLUSTER_SPLITS


def test_an_op_no_family_registers_is_an_error_not_a_decode_check():
    with pytest.raises(ValueError, match="no registered family"):
        verify.check_entry({"op": "rmsnorm", "name": "rmsnorm_bf16", "axes": {}})


def test_a_variant_this_gpu_cannot_run_is_listed_apart_neither_passed_nor_failed(monkeypatch, tmp_path):
    from rich.console import Console

    from cukiln.core import artifacts

    entries = [{"op": "decode", "name": "decode_bf16_d128_s3_v8", "axes": {}},
               {"op": "decode", "name": "decode_bf16_d128_s3_v8_ws", "axes": {"pipeline": "ws"}}]

    def check(entry):
        if entry["axes"].get("pipeline") == "ws":
            raise verify.NotOnThisGPU("the ws pipeline needs sm_90 or newer (this GPU: sm_80)")
        return None

    monkeypatch.setattr(artifacts, "read_manifest", lambda *a: {"variants": entries})
    monkeypatch.setattr(verify, "check_entry", check)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "an sm_80 GPU")
    monkeypatch.setattr(verify, "run_metadata", lambda kind, command: {"command": command})
    console = Console(record=True, width=200)
    out = tmp_path / "verify.json"
    assert verify.verify(console, out=str(out)) == 0
    text = console.export_text()
    assert "1 variants not run on this GPU" in text and "1 need another" in text
    import json

    results = json.loads(out.read_text())["results"]
    assert [r["ok"] for r in results] == [True, None] and "sm_90" in results[1]["not_on_this_gpu"]
    # nothing that ran: not a pass
    monkeypatch.setattr(artifacts, "read_manifest", lambda *a: {"variants": entries[1:]})
    assert verify.verify(Console(record=True), out=None) == 1


@pytest.mark.parametrize("pipeline", ["ws", "ws_deep"])
def test_ws_variants_need_tensor_maps(pipeline, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    with pytest.raises(verify.NotOnThisGPU, match="sm_90"):
        decode_checks.check_variant({"op": "decode", "name": f"decode_bf16_d128_s3_v8_{pipeline}",
                                     "axes": {"pipeline": pipeline}})


def test_a_kernel_of_any_source_is_checked_with_each_source_it_serves():
    from cukiln.core import artifacts
    from cukiln.generated import dispatch
    from cukiln.tools.rope.checks import with_each_source

    entry = next(e for e in artifacts.read_manifest()["variants"]
                 if e["op"] == "kv_append" and not e["axes"]["qk_norm"])
    forms = ["bhsd", "bshd", "fp8"]
    pairs = with_each_source(dispatch.KV_APPEND, entry, forms)
    # every form and every source the table sends to this kernel, neither multiplied by the other
    assert {s for _, s in pairs} == set(dispatch.ANGLE_KINDS) and {f for f, _ in pairs} == set(forms)
    assert len(pairs) == max(len(forms), len(dispatch.ANGLE_KINDS))
