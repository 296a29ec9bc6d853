"""The rooms of DESIGN.md, read off the source: who may import whom, no import circles, and
modules small enough to read in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("console", "agents", "approvals", "audit", "core")
# Which of our top-level packages each may import (DESIGN.md, "Rooms").
MAY_IMPORT = {
    "console": {"console", "agents", "approvals", "audit", "core"},
    "agents": {"agents", "approvals", "audit", "core"},
    "approvals": {"approvals", "audit", "core"},
    "audit": {"audit", "core"},
    "core": {"core"},
}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Our modules that ``name`` imports anywhere in its text (function-level imports count)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                targets.add(child if child in MODULES else base)
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_each_room_imports_only_what_design_allows():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target.split(".")[0] not in MAY_IMPORT[name.split(".")[0]]
    )
    assert wrong == []


def test_no_view_imports_another_apps_views():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target.rsplit(".", 1)[-1] in ("views", "api")
        and target.split(".")[0] != name.split(".")[0]
    )
    assert wrong == []


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    assert _cycles() == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_fits_in_one_sitting(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines"
