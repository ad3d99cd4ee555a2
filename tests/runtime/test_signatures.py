"""Each op's arguments are declared once, by its schema (runtime/schema.py); every signature that takes them follows
it: the public function, cukiln.torch's wrapper, the float64 reference, the torch ops' schemas, and the planner,
which takes every argument the schema gives it."""

from __future__ import annotations

import inspect

import pytest

import cukiln
from cukiln import calls, decode_plan, kv_append_plan, merge_plan, reference, rope_plan
from cukiln.generated.families import API, REFERENCE

OPS = [name for name in REFERENCE]  # the ops (each has a reference)


def _schema(name):
    getattr(cukiln, name)  # imports the op's module, which registers its runtime
    return calls.RUNTIMES[name].schema


def _parameters(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.default, p.kind) for p in inspect.signature(fn).parameters.values()]


def _declared(schema, without=()) -> list[tuple[str, object, object]]:
    return [(p.name, p.default, p.kind) for p in schema.signature(without=without).parameters.values()]


@pytest.mark.parametrize("name", OPS)
def test_the_public_function_and_the_reference_follow_the_schema(name):
    schema = _schema(name)
    assert _parameters(getattr(cukiln, name)) == _declared(schema)
    assert _parameters(getattr(reference, name)) == _declared(schema, without=("stream",))
    assert getattr(cukiln, name).__doc__, "the public function has its docstring"


@pytest.mark.parametrize("name", OPS)
def test_the_torch_wrapper_and_op_schemas_follow_the_schema(name):
    torch = pytest.importorskip("torch")
    import cukiln.torch as ct

    schema = _schema(name)
    assert _parameters(getattr(ct, name)) == _declared(schema, without=("stream",))
    for op_name, form in schema.op_forms().items():
        declared = str(getattr(torch.ops.cukiln, op_name).default._schema)
        derived = schema.torch_schema(op_name, inplace=form.inplace and op_name == schema.inplace_op)
        assert declared == str(torch._C.parse_schema("cukiln::" + derived))


# Each op's planner (the functions its plan(call) hands call.arguments() to) and the arguments of the schema it does
# not take (public-only ones are never handed over; the step's arguments go to two planners)
PLANNERS = {"rope": (rope_plan.plan_rope,), "rope_qk": (rope_plan.plan_rope,),
            # (attention sinks go to the merge kernel's planner, which folds them in after the attention)
            "decode_attention": (decode_plan.plan_decode, merge_plan.plan_merge),
            "kv_append": (kv_append_plan.plan_kv_append,),
            "decode_step": (kv_append_plan.plan_kv_append, decode_plan.plan_decode, merge_plan.plan_merge),
            "merge_attention": (merge_plan.plan_merge,)}
NOT_PLANNED = {"rope_qk": {"q", "q_out"},  # as plan_rope's x and out
               "decode_step": {"advance_lens"}}  # the step's own: a Python step after its launches


@pytest.mark.parametrize("name", OPS)
def test_every_argument_reaches_the_planner(name):
    schema = _schema(name)
    taken = set().union(*(inspect.signature(p).parameters for p in PLANNERS[name]))
    given = {p for a in schema.args if a.role not in ("stream", "renamed") and a.type != "Rotary"
             for p in (a.parts or (a.name,))}
    assert given - taken <= NOT_PLANNED.get(name, set()), f"{name}: no planner takes {given - taken}"


def test_every_op_has_a_runtime_module():
    for name in OPS:
        assert name in API and _schema(name).name == name
