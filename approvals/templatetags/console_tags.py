"""Filters for the reviewer pages. Every value from a model or tool is rendered as text:
these filters return plain strings and leave escaping to the template engine."""

from __future__ import annotations

import json
from typing import Any

from django import template

from core import sealing

register = template.Library()

TIER_CLASSES = {"read": "tier-read", "write": "tier-write", "critical": "tier-critical"}


@register.filter
def as_json(value: Any) -> str:
    """Pretty JSON text (escaped by autoescape where it is shown)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def as_value(value: Any) -> str:
    """A scalar as itself, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def is_erased(value: Any) -> bool:
    """Whether a sealed value reads as erased (its run's data key was destroyed)."""
    return sealing.is_erased(value)


@register.filter
def sealed_label(value: Any) -> str:
    """What stands in for a value that ``is_erased``: "erased", or why it cannot be read."""
    return sealing.sealed_label(value)


@register.filter
def tier_class(tier: str) -> str:
    return TIER_CLASSES.get(str(tier), "tier-other")


@register.filter
def summary(approval: Any) -> str:
    """One line saying what the approval is about: blast radius, rationale, or the args."""
    for value in (approval.payload, approval.args):
        if sealing.is_erased(value):
            return sealing.sealed_label(value)
    payload = approval.payload if isinstance(approval.payload, dict) else {}
    for key in ("blast_radius", "rationale", "description"):
        text = payload.get(key)
        if isinstance(text, str) and text.strip():
            return " ".join(text.split())
    args = approval.args if isinstance(approval.args, dict) else {}
    return ", ".join(f"{k}={as_value(v)}" for k, v in sorted(args.items()))


@register.filter
def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


@register.filter
def sorted_items(mapping: Any) -> list[tuple[str, Any]]:
    """Key/value pairs of a dict, sorted; safe for dicts that have a key named "items"."""
    if not isinstance(mapping, dict):
        return []
    return sorted(mapping.items(), key=lambda kv: str(kv[0]))
