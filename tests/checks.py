"""Comparison with the float64 reference for the GPU tests: cukiln.tools.verify's, as an assertion."""

from __future__ import annotations

import contextlib

from cukiln.tools.verify import compare


def assert_matches_reference(out, ref, what: str = "", *, fp32_units: float = 4) -> None:
    """``fp32_units``: the fp32 arithmetic's allowance in units of 2**-22 x max|ref| (a kernel whose fp32
    intermediates are themselves amplified, like logits through exp, passes a larger one)."""
    problem = compare(out, ref, fp32_units=fp32_units)
    assert problem is None, f"{what}: {problem}"


@contextlib.contextmanager
def planned_afresh(variant: str):
    """Asserts that the block's one call of the native variant ``variant`` (a plan name: "rope#out",
    "decode_attention#out") ran its Python kernel, so under the overrides in force, not a hit of a plan cached
    before (under another pipeline or dispatch, say); asserts nothing where the native hot path is off."""
    from cukiln import native

    module = native.module()
    before = None if module is None else module.python_count(variant)
    yield
    if module is not None:
        assert module.python_count(variant) == before + 1, f"{variant}: the call hit a plan made before"


def rope_op_args(**values) -> tuple:
    """The arguments of the ops cukiln::rope / rope_ after x, in their schema's order (rope_api.SCHEMA's op
    arguments): each one's value from ``values`` (by the op's argument names: offsets_tensor, offset, ...), else
    cukiln.rope's default."""
    from cukiln import rope_api

    names = [o.name for o in rope_api.SCHEMA.op_arguments()][1:]
    args = list(rope_api.arguments(None)[0][1:])
    for name, value in values.items():
        args[names.index(name)] = value
    return tuple(args)


def manifest_entries(*ops: str) -> list[dict]:
    """The generated manifest's entries of the variant ops ``ops`` (none where nothing is built)."""
    import json
    from pathlib import Path

    import cukiln.generated

    path = Path(cukiln.generated.__file__).parent / "manifest.json"
    return [e for e in json.loads(path.read_text())["variants"] if e["op"] in ops] if path.exists() else []
