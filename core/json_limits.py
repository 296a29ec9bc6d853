"""The limits every JSON value from outside must respect before any code of ours walks it.

Our walkers (``json_has_nul``, canonical JSON, diffs, JSON-schema validation, pydantic) recurse,
each using several stack frames per level, so a value nested a few hundred levels deep crashes
them with RecursionError even though the parser accepted it. One depth limit, checked here
without recursion, keeps every walker far from Python's recursion limit. Lone UTF-16 surrogates
(``"\\ud800"`` as a JSON escape) parse into ``str`` values that cannot be encoded as UTF-8, so
hashing, storing or rendering them fails: they are refused here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_JSON_DEPTH = 64


@dataclass(frozen=True)
class JSONProblem:
    path: str  # dotted path of the offending value ("" for the whole body)
    message: str


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_problem(
    value: Any, *, prefix: str = "", max_depth: int = MAX_JSON_DEPTH
) -> JSONProblem | None:
    """The first reason ``value`` may not enter the system, or None (iterative, never recurses)."""
    stack: list[tuple[Any, str, int]] = [(value, prefix, 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                return JSONProblem(path, "must not contain lone UTF-16 surrogates")
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth > max_depth:
            return JSONProblem(prefix, f"must not be nested deeper than {max_depth} levels")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            child_path = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _has_surrogate(key):
                return JSONProblem(path, "keys must not contain lone UTF-16 surrogates")
            stack.append((child, child_path, depth + 1))
    return None
