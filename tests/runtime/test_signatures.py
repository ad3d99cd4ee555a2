"""Each op's arguments are declared once, by its public function; every other signature that takes them (the
positional entry the torch ops call, the float64 reference, cukiln.torch's wrapper, the torch op's schema, the
planner) agrees with it: same names, same order, same defaults."""

from __future__ import annotations

import inspect

import pytest

from cukiln import decode_api, reference, rope_api, rope_plan


def _parameters(fn) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


def test_rope_arguments_are_the_public_signatures():
    declared = _parameters(rope_api.rope)
    assert rope_api.ARGUMENTS == tuple(name for name, _ in declared[1:])
    without_stream = [(n, d) for n, d in declared if n != "stream"]
    assert _parameters(reference.rope) == without_stream
    # rope_qk: (q, k) and the same arguments; prepare and run_rope_qk take k and k_out beside them
    pair = [("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty)] + without_stream[1:]
    assert _parameters(rope_api.rope_qk) == pair + [("stream", None)]
    assert _parameters(reference.rope_qk) == pair
    assert _parameters(rope_api.prepare) == [("x", inspect.Parameter.empty), ("k", inspect.Parameter.empty)] + \
        without_stream[1:] + [("k_out", None)]
    assert [n for n, _ in _parameters(rope_api.run_rope)] == [n for n, _ in without_stream]
    assert [n for n, _ in _parameters(rope_api.run_rope_qk)] == \
        [n for n, _ in pair[:-1]] + ["q_out", "k_out"]


def test_rope_planner_takes_every_argument_it_validates():
    planned = {n for n, _ in _parameters(rope_plan.plan_rope)}
    assert set(rope_api.ARGUMENTS) - {"stream"} <= planned | {"x"}


def test_decode_arguments_are_the_public_signatures():
    declared = [(n, d) for n, d in _parameters(decode_api.decode_attention) if n != "stream"]
    assert _parameters(reference.decode_attention) == declared
    # kv_lens and after, positional with defaults; then, keyword-only, what a decode step's attention says of itself
    positional = _parameters(decode_api.run_decode)[:-1]
    assert positional[4:] == declared[4:] and [n for n, _ in positional] == [n for n, _ in declared]
    assert _parameters(decode_api.run_decode)[-1] == ("for_step", False)
    assert inspect.signature(decode_api.run_decode).parameters["for_step"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_torch_wrappers_and_op_schemas_follow_the_declarations():
    pytest.importorskip("torch")
    import cukiln.torch as ct
    from cukiln import rope_torch

    rope_declared = [(n, d) for n, d in _parameters(rope_api.rope) if n != "stream"]
    assert _parameters(ct.rope) == rope_declared
    assert list(rope_torch.OP_TYPES) == list(rope_torch.OP_ARGUMENTS)
    schema = str(__import__("torch").ops.cukiln.rope.default._schema)
    assert [a.split(" ")[-1].split("=")[0] for a in schema.split("(", 1)[1].rsplit(")", 2)[0].split(", ")][1:] == \
        list(rope_torch.OP_ARGUMENTS)
    assert _parameters(ct.rope_qk) == [("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty)] + \
        rope_declared[1:]
    qk_schema = str(__import__("torch").ops.cukiln.rope_qk.default._schema)
    assert [a.split(" ")[-1].split("=")[0] for a in qk_schema.split("(", 1)[1].rsplit(")", 2)[0].split(", ")][2:] == \
        list(rope_torch.OP_ARGUMENTS)
    decode_declared = [(n, d) for n, d in _parameters(decode_api.decode_attention) if n != "stream"]
    assert _parameters(ct.decode_attention) == decode_declared
