"""The command line as a new user meets it: a user mistake is one line on stderr and exit status 2, piped
output is never cut, --version answers, and the package's public names are all reachable without torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from cukiln import __version__
from cukiln.tools import cli


def _run(argv, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own exits (--version, a bad option)
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version(capsys):
    code, out, _ = _run(["--version"], capsys)
    assert code == 0 and out.strip() == f"cukiln {__version__}"


@pytest.mark.parametrize("argv, message", [
    (["report", "--only", "["], "is not a regular expression"),
    (["build", "--only", "["], "is not a regular expression"),
    (["verify", "--only", "("], "is not a regular expression"),
    (["build", "--arch", "sm_75"], "sm_75 is not supported: cukiln's kernels need sm_80 or newer"),
    (["build", "--arch", "gfx90a"], "expected arch names like sm_90"),
    (["build", "--jobs", "0"], "expected a positive integer"),
    (["plot", "/nonexistent/result.json"], "/nonexistent/result.json: cannot read a benchmark result"),
    (["bench", "rope-qkv"], "invalid choice"),
    (["bench", "overhead", "--only", "("], "is not a regular expression"),
    (["bench", "decode", "--only", "rope"], "--only does not apply to `cukiln bench decode`"),
    (["bench", "overhead", "--no-rotate"], "--no-rotate does not apply to `cukiln bench overhead`"),
    (["bench", "rope", "--rounds", "9"], "--rounds does not apply to `cukiln bench rope`"),
    (["bench", "overhead", "--rounds", "0"], "expected a positive integer"),
    (["bench", "decode", "--q-len", "1,17"], "expected comma-separated query lengths from 1 to 16"),
    (["bench", "rope", "--q-len", "2"], "--q-len does not apply to `cukiln bench rope`"),
    (["report", "--limit", "-3"], "expected a count (0 or more)"),
    (["report", "--only", "zzznomatch"], "--only 'zzznomatch' matches no variant"),
    (["build", "--only", "zzznomatch"], "--only 'zzznomatch' matches no variant"),
])
def test_a_user_mistake_is_one_line_and_exit_status_2(argv, message, capsys, monkeypatch):
    from cukiln.codegen import build

    monkeypatch.setattr(build, "compile_all", lambda *a, **k: pytest.fail("compiled after a bad option"))
    code, out, err = _run(argv, capsys)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_gpu_commands_without_a_gpu_say_so_in_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for argv in (["bench", "rope"], ["tune", "decode"], ["verify"]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and err.strip() == f"cukiln {argv[0]}: needs a CUDA GPU, and torch sees none"


def test_piped_report_is_never_cut():
    done = subprocess.run([sys.executable, "-m", "cukiln.tools.cli", "report", "--limit", "0"], capture_output=True,
                          text=True, check=True)
    assert "…" not in done.stdout
    for name in ("sm_90", "decode_combine", "rope_bf16_thd_interleaved_any_s4_v1_token"):
        assert name in done.stdout
    report = json.loads(subprocess.run([sys.executable, "-m", "cukiln.tools.cli", "report", "--json"],
                                       capture_output=True, text=True, check=True).stdout)
    assert {"rope", "decode"} <= set(report["ops"])


def test_report_only_holds_the_matching_variants_in_every_part():
    done = subprocess.run([sys.executable, "-m", "cukiln.tools.cli", "report", "--json", "--only", "^kv_append_"],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert set(report["ops"]) == {"kv_append"}
    assert report["variants"] and all(r["op"] == "kv_append" for r in report["variants"])
    assert set(report["rules"]) <= {"kv_append"}  # rope's and decode's tuning tables are not kv_append's
    text = subprocess.run([sys.executable, "-m", "cukiln.tools.cli", "report", "--only", "^kv_append_"],
                          capture_output=True, text=True, check=True).stdout
    assert "rope" not in text and "decode" not in text


@pytest.mark.parametrize("argv", [["report"], ["report", "--json"], ["--help"], ["build", "--help"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(argv):
    """`cukiln report | head -1`: the command exits 0 and prints nothing on stderr once head has gone."""
    command = [sys.executable, "-m", "cukiln.tools.cli", *argv]
    pipe = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pipe.stdout.readline()
    pipe.stdout.close()  # the reader goes away; what the command writes next meets a closed pipe
    _, err = pipe.communicate(timeout=120)
    assert pipe.returncode == 0 and err == b"", err.decode()


def test_the_package_lists_and_reaches_its_public_names_without_importing_torch():
    code = ("import sys, cukiln; names = dir(cukiln); "
            "assert {'rope', 'decode_attention', 'reference', 'context_parallel', 'torch'} <= set(names), names; "
            "assert set(cukiln.__all__) >= {'rope', 'decode_attention', 'context_parallel'}; "
            "assert 'torch' not in sys.modules, 'import cukiln imported torch'; "
            "cukiln.context_parallel.shard_index([4], 1, 0); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None, reason="no C++ compiler or ninja")
def test_native_compiles_the_hot_path_ahead_and_says_where(capsys, monkeypatch):
    pytest.importorskip("torch")
    from cukiln import native

    monkeypatch.delenv("CUKILN_NATIVE", raising=False)
    monkeypatch.setattr(native, "_tried", False)  # as if first asked now: a process may have started with it off
    code, out, err = _run(["native"], capsys)
    assert code == 0 and native.module() is not None, err
    assert native.module().__file__ in out
    # turned off: said on stderr, with exit status 1 (an image build that asked for it fails loudly)
    monkeypatch.setenv("CUKILN_NATIVE", "0")
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_off", "")
    code, out, err = _run(["native"], capsys)
    assert code == 1 and "off: turned off by CUKILN_NATIVE=0" in err
