"""The house's import graph, read from every file's import statements (those inside functions too):

- no cycle between files, and none between the package's folders (core, codegen, runtime, tools, ...);
- codegen never reaches the runtime or the tools, and the runtime reaches codegen only for the JIT fallback
  (loader.py); core reaches nothing of cukiln but generated/;
- tools and benchmarks use the runtime's and codegen's public names only (no ``_private`` name of another
  folder), so that they measure through the same doors as users.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
# package name -> folder, longest first (cukiln.tools.rope before cukiln.tools before cukiln)
FOLDERS = sorted(PACKAGE_DIRS.items(), key=lambda item: -len(item[0]))
TOP = {name: folder.split("/")[0] for name, folder in PACKAGE_DIRS.items()}


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    for name, folder in FOLDERS:
        if rel.parts[: len(Path(folder).parts)] == Path(folder).parts:
            rest = rel.parts[len(Path(folder).parts):]
            parts = [name, *rest]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def _file_of(module: str) -> Path | None:
    """The file of a cukiln module (a package's __init__.py), None for anything outside cukiln."""
    for name, folder in FOLDERS:
        if module == name or module.startswith(name + "."):
            rest = module[len(name):].lstrip(".").split(".") if module != name else []
            base = ROOT / folder / Path(*rest) if rest else ROOT / folder
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.exists():
                    return candidate
            return None
    return None


PACKAGE_FILES = sorted(p for folder in {f.split("/")[0] for f in PACKAGE_DIRS.values()}
                       for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import statement of ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text())
    package = _module_of(path) if path in PACKAGE_FILES else ""
    if path.name != "__init__.py" and package:
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names = [a.name for a in node.names]
            # `from . import x` may take a submodule: count it as importing that file
            subs = [f"{module}.{n}" for n in names if _file_of(f"{module}.{n}") is not None]
            found += [(module, [n for n in names if f"{module}.{n}" not in subs])] + [(s, []) for s in subs]
        elif (isinstance(node, ast.Call) and _called(node.func) == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            # importlib.import_module("cukiln.x"): an import too, which a loop may hide behind
            target = node.args[0].value
            if target.startswith(".") and len(node.args) > 1:
                target = package + target if target != "." else package
            found.append((target, []))
    return found


def _called(func) -> str:
    """The name a call calls: ``import_module`` for both import_module(...) and importlib.import_module(...)."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def graph() -> dict[Path, set[Path]]:
    edges: dict[Path, set[Path]] = {}
    for path in PACKAGE_FILES:
        targets = set()
        for module, _ in imports(path):
            target = _file_of(module)
            if target is not None and target != path:
                targets.add(target)
        edges[path] = targets
    return edges


def _cycle(edges: dict) -> list | None:
    """One cycle of the directed graph ``edges``, or None."""
    state: dict = {}
    stack: list = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ()), key=str):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges, key=str):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _folder(path: Path) -> str:
    return path.relative_to(ROOT).parts[0]


def test_a_literal_import_module_is_an_import(tmp_path, monkeypatch):
    source = tmp_path / "probe.py"
    source.write_text("import importlib\nimportlib.import_module('cukiln.torch')\n")
    assert ("cukiln.torch", []) in imports(source)


def test_no_file_imports_itself_through_others():
    cycle = _cycle(graph())
    assert cycle is None, " -> ".join(str(p.relative_to(ROOT)) for p in cycle)


def test_no_cycle_between_folders_and_the_allowed_directions():
    folder_edges: dict[str, set[str]] = {}
    reasons: dict[tuple[str, str], list[str]] = {}
    for path, targets in graph().items():
        for target in targets:
            a, b = _folder(path), _folder(target)
            if a != b:
                folder_edges.setdefault(a, set()).add(b)
                reasons.setdefault((a, b), []).append(str(path.relative_to(ROOT)))
    assert _cycle(folder_edges) is None, folder_edges
    assert not folder_edges.get("codegen", set()) & {"runtime", "tools"}, reasons
    assert folder_edges.get("core", set()) <= {"generated"}, reasons
    assert set(reasons.get(("runtime", "codegen"), [])) <= {"runtime/loader.py"}, reasons


OUTSIDE_FILES = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", [p for p in PACKAGE_FILES if _folder(p) == "tools"] + OUTSIDE_FILES,
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_tools_and_benchmarks_use_public_names_only(path):
    own = _folder(path)
    private = []
    tree = ast.parse(path.read_text())
    aliases = {}  # a local name bound to a cukiln module of another folder
    for module, names in imports(path):
        target = _file_of(module)
        if target is None or _folder(target) == own:
            continue
        private += [f"{module}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
        private += [module] if any(part.startswith("_") and not part.startswith("__") for part in module.split(".")) else []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                module = f"{node.module}.{alias.name}" if node.module else alias.name
                if node.level == 0 and _file_of(module) is not None and _folder(_file_of(module)) != own:
                    aliases[alias.asname or alias.name] = module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and _file_of(alias.name) is not None and _folder(_file_of(alias.name)) != own:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            private.append(f"{aliases[node.value.id]}.{node.attr}")
    assert not private, f"{path.relative_to(ROOT)} uses private names: {sorted(set(private))}"
