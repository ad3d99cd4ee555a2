"""The Jinja2 environment that renders templates/ (strict: an undefined name is an error, not an empty string)."""

from __future__ import annotations

import functools
from importlib import resources

import jinja2


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    root = resources.files("cukiln.templates")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        autoescape=False,
    )


def render(template: str, **values) -> str:
    """templates/``template`` rendered with ``values``."""
    return _environment().get_template(template).render(**values)


def macros(template: str):
    """templates/``template``'s macros, callable from Python (a tool rendering one piece as the build renders it)."""
    return _environment().get_template(template).module
