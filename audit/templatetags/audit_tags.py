"""Template helpers for the audit pages."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for <pre> blocks (autoescaped by the template)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def short_hash(value: str) -> str:
    return f"{value[:12]}…" if value else ""
