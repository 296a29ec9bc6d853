"""Machine-derived differences between proposed and edited args."""

from __future__ import annotations

from typing import Any

_MISSING = object()


def args_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{field: {"from": old, "to": new}} for every field whose value changed (None if absent)."""
    diff: dict[str, dict[str, Any]] = {}
    for key in sorted(set(before) | set(after)):
        old = before.get(key, _MISSING)
        new = after.get(key, _MISSING)
        if old != new:
            diff[key] = {
                "from": None if old is _MISSING else old,
                "to": None if new is _MISSING else new,
            }
    return diff
