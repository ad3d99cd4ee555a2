"""Every Python file of the repository parses, scripts outside the package included (benchmarks/, tests/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("benchmarks", "codegen", "runtime", "tools", "tests", "templates")
                 for p in (ROOT / folder).rglob("*.py")) + [ROOT / "setup.py"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_parses(path):
    ast.parse(path.read_text(), filename=str(path))
