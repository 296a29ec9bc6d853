"""``{% after_the_fact_count as n %}``: how many actions wait for the reader's review after
the fact (the nav's badge)."""

from __future__ import annotations

from typing import Any

from django import template

from approvals.autonomy_selectors import autonomous_action_count

register = template.Library()


@register.simple_tag(takes_context=True)
def after_the_fact_count(context: dict[str, Any]) -> int:
    request = context.get("request")
    user = getattr(request, "user", None)
    return autonomous_action_count(user=user) if user is not None else 0
