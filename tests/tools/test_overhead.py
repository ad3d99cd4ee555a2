"""`cukiln bench overhead`'s timing order, on the CPU (the paths replaced by stubs that log their calls): every
path that compiles nothing is warmed and timed before any compiled path runs at all."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cukiln.tools import overhead  # noqa: E402


def test_eager_paths_are_timed_before_anything_compiles(monkeypatch):
    names = ("torch: y.add_(1.0)", "torch.compile(fullgraph) of y.add_(1.0)", "cukiln.rope (in place, base)",
             "torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)", "CUDA graph replay of cukiln.rope",
             "floor: torch.compile(fullgraph) of that op", "op cukiln::rope_ through the dispatcher (in place)")
    calls = []
    paths = {name: (lambda name=name: calls.append(name)) for name in names}
    monkeypatch.setattr(overhead, "_paths", lambda only=None: paths)
    monkeypatch.setattr(overhead, "per_call_us", lambda fn, count: (fn(), 2.0)[1])
    monkeypatch.setattr(overhead, "python_calls", lambda: 0)
    monkeypatch.setattr(overhead, "submit_us", lambda fn: 1.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    rounds = []
    result = overhead.measure(rounds=3, calls=1, advance=lambda: rounds.append(len(calls)))
    first_compiled = next(i for i, name in enumerate(calls) if overhead.compiles(name))
    eager = [name for name in names if not overhead.compiles(name)]
    assert all(overhead.compiles(name) for name in calls[first_compiled:]), "an eager path ran after a compiled one"
    # warmed, then timed 3 rounds: once a round, or in PAIR_BLOCKS blocks where paired (torch's add_ also before
    # each of those)
    for name in eager:
        if name != overhead.EAGER_REFERENCE:
            blocks = overhead.PAIR_BLOCKS if overhead.paired_reference(name) else 1
            assert calls[:first_compiled].count(name) == 200 + 3 * blocks, name
    assert len(rounds) == 6, "a round of each phase advances the progress"
    assert set(result) == set(names) and all(f["rounds_us"] == [2.0] * 3 for f in result.values())
    assert result["CUDA graph replay of cukiln.rope"]["submit_us"] == 1.0
    reduce = result["torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)"]
    assert reduce["cuda_graph"] is True and reduce["cuda_graph_skipped"] == []


def test_pairing_holds_each_path_to_its_reference_of_the_same_moment(monkeypatch):
    # a host whose speed drifts: every timed block costs its path's own time times the host's factor of the moment,
    # a moment that starts with each block of a reference (so a path and the reference timed just before it share
    # one): the paired ratio gives each eager path's own ratio back, whatever the drift
    own = {"torch: y.add_(1.0)": 8.0, "torch.compile(fullgraph) of y.add_(1.0)": 40.0,
           "torch.compile(reduce-overhead) of y + 1.0": 60.0, "cukiln.rope (in place, base)": 10.0,
           "torch.compile(fullgraph) of cukiln.torch.rope": 44.0,
           "torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)": 62.0,
           "floor: an op with an empty Python kernel, through the dispatcher": 2.0}
    paths = {name: (lambda: None) for name in own}
    for name, fn in paths.items():
        fn.name = name
    blocks = []
    references = (overhead.EAGER_REFERENCE, overhead.COMPILED_REFERENCE, overhead.CAPTURED_REFERENCE)

    def timed(fn, count):
        blocks.append(fn.name)
        moment = sum(name in references for name in blocks)
        return own[fn.name] * (1.0, 1.6, 1.1, 1.9, 1.3)[moment % 5]

    monkeypatch.setattr(overhead, "_paths", lambda only=None: paths)
    monkeypatch.setattr(overhead, "_warm", lambda phase: None)
    monkeypatch.setattr(overhead, "per_call_us", timed)
    monkeypatch.setattr(overhead, "python_calls", lambda: 0)
    result = overhead.measure(rounds=5, calls=1)
    rope = result["cukiln.rope (in place, base)"]["paired"]
    assert rope["reference"] == overhead.EAGER_REFERENCE and rope["ratio"] == pytest.approx(10.0 / 8.0)
    compiled = result["torch.compile(fullgraph) of cukiln.torch.rope"]["paired"]
    assert compiled["reference"] == overhead.COMPILED_REFERENCE
    # a difference scales with the moment's factor: within the drift's range of the true +4 µs
    assert 4.0 <= compiled["difference_us"] <= 4.0 * 1.9
    captured = result["torch.compile(reduce-overhead) of cukiln.torch.rope (allocates out)"]["paired"]
    assert captured["reference"] == overhead.CAPTURED_REFERENCE and 2.0 <= captured["difference_us"] <= 2.0 * 1.9
    for name in own:
        assert ("paired" in result[name]) == (overhead.paired_reference(name) is not None)
    assert overhead.paired_reference("torch: y.add_(1.0)") is None
    # a floor is read as the rows it bounds are: against the same reference, at the same moments
    assert result["floor: an op with an empty Python kernel, through the dispatcher"]["paired"]["ratio"] == (
        pytest.approx(2.0 / 8.0))
    assert overhead.paired_reference("floor: torch.compile(fullgraph) of that op") == overhead.COMPILED_REFERENCE
    assert overhead.paired_reference("floor: torch.compile(reduce-overhead) of that op") == (
        overhead.CAPTURED_REFERENCE)
    for i, name in enumerate(blocks):
        reference = overhead.paired_reference(name)
        if reference is not None:
            assert blocks[i - 1] == reference, "a path's block comes right after its reference's"


def test_only_keeps_the_references_its_paths_are_paired_with():
    names = ("torch: y.add_(1.0)", "torch: y + 1.0 (allocates)", "torch.compile(fullgraph) of y.add_(1.0)",
             "torch.compile(reduce-overhead) of y + 1.0", "cukiln.decode_step (b=1, T=64, device lengths, out=)",
             "torch.compile(fullgraph) of cukiln.torch.decode_step", "torch.compile(fullgraph) of cukiln.torch.rope",
             "torch.compile(reduce-overhead) of cukiln.torch.decode_step")
    paths = {name: None for name in names}
    assert list(overhead.select(paths, "decode_step")) == [
        "torch: y.add_(1.0)", "torch: y + 1.0 (allocates)", "torch.compile(fullgraph) of y.add_(1.0)",
        "torch.compile(reduce-overhead) of y + 1.0", "cukiln.decode_step (b=1, T=64, device lengths, out=)",
        "torch.compile(fullgraph) of cukiln.torch.decode_step",
        "torch.compile(reduce-overhead) of cukiln.torch.decode_step"]
    assert list(overhead.select(paths, "cukiln.decode_step")) == [
        "torch: y.add_(1.0)", "torch: y + 1.0 (allocates)", "cukiln.decode_step (b=1, T=64, device lengths, out=)"]


def test_calls_sent_to_python_are_counted_against_the_path_timed(monkeypatch):
    # a path whose native key is not covered runs its op's Python kernel on every call: the bench counts those calls
    # against that path alone (not its reference timed beside it), and says so under the table
    from rich.console import Console

    sent = [0]
    paths = {"torch: y.add_(1.0)": lambda: None, "torch: y + 1.0 (allocates)": lambda: None,
             "cukiln.rope (in place, base)": lambda: None,
             "cukiln.decode_attention (b=1, T=64, out=)": lambda: sent.__setitem__(0, sent[0] + 1)}
    monkeypatch.setattr(overhead, "_paths", lambda only=None: paths)
    monkeypatch.setattr(overhead, "_warm", lambda phase: None)
    monkeypatch.setattr(overhead, "per_call_us", lambda fn, count: (fn(), 2.0)[1])
    monkeypatch.setattr(overhead, "python_calls", lambda: sent[0])
    result = overhead.measure(rounds=3, calls=10, blocks=2)
    decode = "cukiln.decode_attention (b=1, T=64, out=)"
    assert result[decode]["python_calls"] == 3 * 2  # one call a block in this stub, two blocks a round
    assert all(f["python_calls"] == 0 for name, f in result.items() if name != decode)
    console = Console(record=True, width=400)
    overhead.print_result({"device": "a GPU", "rounds": 3, "calls_per_round": 10, "paths": result}, console)
    assert f"served by Python while timed, not by the native hot path: {decode} (6 calls)" in console.export_text()


def test_rounds_given_are_the_rounds_timed_and_the_command_says_so(monkeypatch):
    from rich.console import Console

    seen = []
    monkeypatch.setattr(overhead, "measure", lambda rounds, calls, advance, only: seen.append((rounds, calls)) or {})
    monkeypatch.setattr(overhead, "run_metadata", lambda bench, command: {"command": command})
    console = Console(quiet=True)
    assert overhead.run(console, rounds=21) == {"command": "cukiln bench overhead --rounds 21",
                                                "calls_per_round": overhead.CALLS, "rounds": 21, "paths": {}}
    assert overhead.run(console)["command"] == "cukiln bench overhead" and seen[-1] == (overhead.ROUNDS,
                                                                                         overhead.CALLS)
    assert seen[0] == (21, overhead.CALLS)


def test_compiled_marks_the_tensors_it_is_told_to_as_static(monkeypatch):
    marked = []
    monkeypatch.setattr(torch._dynamo, "mark_static_address", marked.append)
    monkeypatch.setattr(torch, "compile", lambda body, **options: body)
    a, b, c = torch.zeros(1), torch.zeros(2), torch.zeros(3)
    overhead.compiled(lambda *t: None, a, b, 7, c, static=(1, 3))
    assert [t.numel() for t in marked] == [2, 3]
    marked.clear()
    overhead.compiled(lambda *t: None, a, b, 7, c, static=True)
    assert [t.numel() for t in marked] == [1, 2, 3]
    marked.clear()
    overhead.compiled(lambda *t: None, a, b, mode="reduce-overhead")
    assert marked == []


def test_each_path_is_held_to_its_target():
    def paired(value, key="ratio"):
        return {"paired": {key: value}}

    assert overhead.verdict("cukiln.rope (in place, base)", paired(1.30))["holds"]
    assert not overhead.verdict("cukiln.rope (in place, base)", paired(1.31))["holds"]
    assert overhead.verdict("cukiln.torch.decode_step (eager)", paired(1.5))["holds"]
    assert not overhead.verdict("op cukiln::decode_step through the dispatcher", paired(1.74))["holds"]
    compiled = "torch.compile(fullgraph) of cukiln.torch.rope"
    assert overhead.verdict(compiled, paired(5.0, "difference_us"))["holds"]
    assert not overhead.verdict(compiled, paired(5.4, "difference_us"))["holds"]
    captured = "torch.compile(reduce-overhead) of cukiln.torch.decode_step"
    assert overhead.verdict(captured, {**paired(-11.0, "difference_us"), "cuda_graph": True})["holds"]
    skipped = overhead.verdict(captured, {**paired(-11.0, "difference_us"), "cuda_graph": False})
    assert not skipped["holds"] and skipped["why"] == "not captured in a CUDA graph"
    replay = "CUDA graph replay of cukiln.torch.rope"
    assert overhead.verdict(replay, {"submit_us": 4.9})["holds"]
    assert not overhead.verdict(replay, {"submit_us": 5.1})["holds"]
    # no target: torch's own rows, floors, breakdowns, an autograd-recording call; and no figure to judge: None
    for name in ("torch: y.add_(1.0)", "floor: CUDA graph replay of y.add_(1.0)", "rope breakdown: driver launch alone",
                 "cukiln.torch.rope (x requires grad: op + autograd)", "torch.compile(fullgraph) of y.add_(1.0)"):
        assert overhead.target_of(name) is None and overhead.verdict(name, paired(1.0)) is None
    assert overhead.verdict("cukiln.rope (in place, base)", {}) is None


def test_a_paired_round_takes_the_median_over_its_pairs_of_blocks(monkeypatch):
    # blocks alternate, the reference's first; a host that drifts between pairs leaves each pair's difference whole
    timed = []
    speeds = iter([10.0, 13.0, 30.0, 33.0, 12.0, 99.0])  # pairs: +3, +3, +87 (a burst of noise in one block)
    monkeypatch.setattr(overhead, "per_call_us", lambda fn, calls: (timed.append((fn, calls)), next(speeds))[1])
    own, figure = overhead.paired_round("fn", "ref", lambda a, b: a - b, calls=30, blocks=3)
    assert timed == [("ref", 10), ("fn", 10)] * 3
    assert figure == 3.0 and own == (13.0 + 33.0 + 99.0) / 3


def test_only_leaves_out_a_family_whose_paths_cannot_be_built():
    # an A/B of one op's host time builds that op's kernels only: another family's setup fails, and is left out
    class Family:
        def __init__(self, name):
            self.name = name

    def build(family):
        if family.name == "rope":
            raise AssertionError("no RoPE variant for ('bf16', ...)")
        return {f"cukiln.{family.name} (out=)": lambda: None, f"{family.name} breakdown: nothing": None}

    families = [Family("rope"), Family("decode_step")]
    found, left_out = overhead.family_paths(families, "decode_step", build)
    assert list(found) == ["cukiln.decode_step (out=)"]
    assert left_out == {"rope": "AssertionError: no RoPE variant for ('bf16', ...)"}
    with pytest.raises(AssertionError, match="no RoPE variant"):  # without --only every path is wanted
        overhead.family_paths(families, None, build)
