"""docs/api.md: the API reference, written from each op's schema (runtime/schema.py), the one declaration of its
arguments. ``python -m cukiln.tools.api_doc > docs/api.md`` writes it; tests/test_docs.py holds the file to it."""

from __future__ import annotations

import importlib

HEADER = """# API reference

Written from each op's schema (`runtime/<op>_api.py`, `SCHEMA`), the one declaration of its arguments, by
`python -m cukiln.tools.api_doc > docs/api.md`; a test holds this file to the schemas. The same declarations give
each function's docstring (`help(cukiln.rope)`), `cukiln.torch.<op>` (the same signature less `stream`) and
`cukiln.reference.<op>` (the float64 reference, likewise). How the ops behave beyond their arguments is in
[guide.md](guide.md).

Types: `Tensor` (a torch tensor, or any `__dlpack__` / `__cuda_array_interface__` array: CuPy, JAX, ...), with the
dtypes it takes; `IntOrTensor` (an int, or an int tensor of one value a row); `Rotary` (a `cukiln.Rotary`);
`Stream` (a torch, CuPy or JAX stream, or a raw handle). `?`: None is a value.
"""


def render() -> str:
    """The text of docs/api.md."""
    from cukiln.calls import RUNTIMES
    from cukiln.generated.families import API

    sections = [HEADER]
    for name, module in API.items():
        importlib.import_module(f"cukiln.{module}")
        if name in RUNTIMES:
            sections.append(RUNTIMES[name].schema.api_markdown())
    return "\n".join(sections)


if __name__ == "__main__":
    print(render(), end="")
