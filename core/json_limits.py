"""The limits every JSON value from outside must respect before any code of ours walks it.

Our walkers (``json_has_nul``, canonical JSON, diffs, JSON-schema validation, pydantic) recurse,
each using several stack frames per level, so a value nested a few hundred levels deep crashes
them with RecursionError even though the parser accepted it. One depth limit, checked here
without recursion, keeps every walker far from Python's recursion limit. Lone UTF-16 surrogates
(``"\\ud800"`` as a JSON escape) parse into ``str`` values that cannot be encoded as UTF-8, so
hashing, storing or rendering them fails: they are refused here too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_JSON_DEPTH = 64
# The largest integer every JSON reader holds exactly (IEEE-754 doubles, RFC 8785's numbers).
SAFE_INTEGER = 2**53 - 1


@dataclass(frozen=True)
class JSONProblem:
    path: str  # dotted path of the offending value ("" for the whole body)
    message: str


def _inexact(node: Any) -> str:
    if isinstance(node, float) and not math.isfinite(node):
        return "NaN and infinities are not JSON numbers"
    if isinstance(node, int) and not isinstance(node, bool) and abs(node) > SAFE_INTEGER:
        return f"integers must be within +-{SAFE_INTEGER} (IEEE-754 doubles)"
    return ""


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_problem(
    value: Any, *, prefix: str = "", max_depth: int = MAX_JSON_DEPTH, exact: bool = False
) -> JSONProblem | None:
    """The first reason ``value`` may not enter the system, or None (iterative, never recurses).

    ``exact`` also refuses what the audit's RFC 8785 text cannot hold exactly (invariant 15):
    NaN, infinities, integers beyond +-(2**53 - 1)."""
    stack: list[tuple[Any, str, int]] = [(value, prefix, 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                return JSONProblem(path, "must not contain lone UTF-16 surrogates")
            continue
        if exact and _inexact(node):
            return JSONProblem(path, _inexact(node))
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
