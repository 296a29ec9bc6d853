"""``{% if user|may_view_metrics %}``: whether to show the Metrics link."""

from __future__ import annotations

from typing import Any

from django import template

from console.metrics.definitions import user_may_view_metrics

register = template.Library()


@register.filter
def may_view_metrics(user: Any) -> bool:
    return user_may_view_metrics(user)


@register.filter
def seconds(value: float | None) -> str:
    """A duration in seconds as "8.5 s", "4 min 10 s", "3 h 5 min" or "2 d 4 h"; "-" if none."""
    if value is None:
        return "–"
    if value < 60:
        return f"{value:.1f} s".replace(".0 s", " s")
    total = int(value)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s"


@register.filter
def percent(value: float | None) -> str:
    """A share as "97.5 %"; "-" if none."""
    if value is None:
        return "–"
    return f"{value * 100:.1f} %"


@register.filter
def get(mapping: dict, key: Any) -> Any:
    return mapping.get(key)
